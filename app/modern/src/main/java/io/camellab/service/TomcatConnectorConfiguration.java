package io.camellab.service;

import org.apache.catalina.connector.Connector;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.tomcat.servlet.TomcatServletWebServerFactory;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The modern stack's AJP connector (Tomcat 11 embedded in Spring Boot 4): NIO or NIO2, sized on its own
 * (lab.ajp.*). With spring.threads.virtual.enabled, Spring Boot hands the HTTP connector's requests to
 * virtual threads; it leaves an added connector alone, so the AJP one is given them here.
 */
@Configuration(proxyBeanMethods = false)
public class TomcatConnectorConfiguration {

    static final String AJP_NIO = "org.apache.coyote.ajp.AjpNioProtocol";
    static final String AJP_NIO2 = "org.apache.coyote.ajp.AjpNio2Protocol";

    @Bean
    WebServerFactoryCustomizer<TomcatServletWebServerFactory> ajpConnectorCustomizer(
            AjpProperties ajp, @Value("${spring.threads.virtual.enabled:false}") boolean virtualThreads) {
        return factory -> {
            if (!ajp.isEnabled()) {
                return;
            }
            Connector connector = AjpConnector.create(ajp.getProtocol() == AjpProperties.Protocol.NIO2 ? AJP_NIO2 : AJP_NIO, ajp);
            // Tomcat's own switch (its endpoint then owns a virtual thread executor, as NIO2 needs to stop
            // cleanly): a new virtual thread per request, unpooled, as Spring Boot gives the HTTP connector.
            connector.setProperty("useVirtualThreads", String.valueOf(virtualThreads));
            factory.addAdditionalConnectors(connector);
        };
    }
}
