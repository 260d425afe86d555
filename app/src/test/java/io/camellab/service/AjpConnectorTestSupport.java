package io.camellab.service;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;

import org.apache.catalina.connector.Connector;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.web.embedded.tomcat.TomcatWebServer;
import org.springframework.boot.web.servlet.context.ServletWebServerApplicationContext;

/** Shared checks for the AJP connector, run once per protocol by the subclasses. */
abstract class AjpConnectorTestSupport {

    @Autowired
    private ServletWebServerApplicationContext context;

    abstract String expectedProtocol();

    Connector ajpConnector() {
        Connector[] connectors = ((TomcatWebServer) context.getWebServer()).getTomcat().getService().findConnectors();
        for (Connector connector : connectors) {
            if (connector.getProtocolHandlerClassName().contains(".ajp.")) {
                return connector;
            }
        }
        throw new AssertionError("no AJP connector among " + List.of(connectors));
    }

    @Test
    void theAjpConnectorRunsTheRequestedProtocolWithItsOwnSizing() {
        Connector ajp = ajpConnector();
        assertThat(ajp.getProtocolHandlerClassName()).isEqualTo(expectedProtocol());
        assertThat(ajp.getStateName()).isEqualTo("STARTED");
        assertThat(ajp.getProperty("maxThreads")).isEqualTo(42);
        assertThat(ajp.getProperty("minSpareThreads")).isEqualTo(7);
        assertThat(ajp.getProperty("connectionTimeout")).isEqualTo(30000);
        // Sizing the AJP connector leaves the HTTP connector's pool at Tomcat's defaults.
        Connector http = ((TomcatWebServer) context.getWebServer()).getTomcat().getConnector();
        assertThat(http.getProperty("maxThreads")).isEqualTo(200);
        assertThat(http.getProperty("minSpareThreads")).isEqualTo(10);
    }

    /** AJP13 CPing (0x0A) must be answered by CPong (0x09): the connector really speaks AJP. */
    @Test
    void theAjpConnectorAnswersACPing() throws Exception {
        assertThat(AjpProbe.cping(ajpConnector().getLocalPort())).containsExactly('A', 'B', 0x00, 0x01, 0x09);
    }

    @Test
    void theInfoEndpointReportsTheConnectorsAsObserved() {
        List<Map<String, Object>> connectors = TomcatConnectorConfiguration.describeConnectors(context.getWebServer());
        assertThat(connectors).extracting(c -> c.get("protocol"))
                .containsExactly("org.apache.coyote.http11.Http11NioProtocol", expectedProtocol());
    }
}
