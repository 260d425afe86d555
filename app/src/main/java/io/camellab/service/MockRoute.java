package io.camellab.service;

import java.io.IOException;

import org.apache.camel.Exchange;
import org.apache.camel.builder.RouteBuilder;
import org.apache.camel.http.base.HttpOperationFailedException;
import org.apache.camel.model.rest.RestBindingMode;
import org.springframework.stereotype.Component;

/**
 * GET /camel/mock: calls the backend, composes a JSON reply and audits every request and reply,
 * as the service of the write-up did. Backend failures become clean JSON errors.
 */
@Component
public class MockRoute extends RouteBuilder {

    private final ReplyComposer composer;
    private final Auditor auditor;

    public MockRoute(ReplyComposer composer, Auditor auditor) {
        this.composer = composer;
        this.auditor = auditor;
    }

    @Override
    public void configure() {
        Stack.rest(restConfiguration()).bindingMode(RestBindingMode.off);

        // Closest exception type wins, so the timeouts are told apart from other I/O failures.
        onException(HttpOperationFailedException.class).handled(true)
                .bean(composer, "backendFailed")
                .to("direct:audit-reply");
        onException(Stack.BACKEND_TIMEOUTS).handled(true)
                .bean(composer, "backendTimedOut")
                .to("direct:audit-reply");
        onException(Stack.BACKEND_POOL_EXHAUSTED).handled(true)
                .bean(composer, "poolExhausted")
                .to("direct:audit-reply");
        onException(IOException.class).handled(true)
                .bean(composer, "backendUnreachable")
                .to("direct:audit-reply");

        rest("/mock").get().routeId("mock-rest").produces("application/json").to("direct:mock");

        from("direct:mock").routeId("mock")
                .bean(composer, "begin")
                .bean(auditor, "request")
                // The servlet's headers (CamelHttpPath above all) would be appended to the backend URL.
                .removeHeaders("*")
                // A GET without body: camel-http would POST the servlet's (empty) request stream.
                .setHeader(Exchange.HTTP_METHOD, constant("GET"))
                .setBody(constant(null))
                .to("{{lab.backend.url}}")
                .bean(auditor, "backend")
                .bean(composer, "compose")
                .to("direct:audit-reply");

        from("direct:audit-reply").routeId("audit-reply")
                .bean(auditor, "reply");
    }
}
