package io.camellab.service;

import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;

// Camel registers its servlet JVM-wide: one live application context at a time.
@DirtiesContext
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
        "management.server.port=0", "lab.ajp.enabled=true", "lab.ajp.port=0", "lab.ajp.secret=test-secret",
        "lab.ajp.protocol=NIO2", "lab.ajp.max-threads=42", "lab.ajp.min-spare-threads=7",
        "lab.ajp.connection-timeout=30s"})
class AjpNio2ConnectorTest extends AjpConnectorTestSupport {

    @Override
    String expectedProtocol() {
        return TomcatConnectorConfiguration.AJP_NIO2;
    }
}
