package io.camellab.service;

import java.util.List;
import java.util.Map;

import org.springframework.boot.web.embedded.tomcat.TomcatServletWebServerFactory;
import org.springframework.boot.web.embedded.tomcat.TomcatWebServer;
import org.springframework.boot.web.server.WebServer;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The stack-specific part of the service (Tomcat 9 embedded in Spring Boot 2.7): adds the AJP
 * connector, NIO, NIO2 or APR, with its own sizing (lab.ajp.*), so that sizing the connector HTTPD talks
 * to does not also grow the other one's thread pool. Spring Boot registers Tomcat's
 * AprLifecycleListener itself whenever the native library loads.
 */
@Configuration(proxyBeanMethods = false)
public class TomcatConnectorConfiguration {

    static final String AJP_NIO = "org.apache.coyote.ajp.AjpNioProtocol";
    static final String AJP_NIO2 = "org.apache.coyote.ajp.AjpNio2Protocol";
    static final String AJP_APR = "org.apache.coyote.ajp.AjpAprProtocol";

    @Bean
    WebServerFactoryCustomizer<TomcatServletWebServerFactory> ajpConnectorCustomizer(AjpProperties ajp) {
        return factory -> {
            if (!ajp.isEnabled()) {
                return;
            }
            if (ajp.getProtocol() == AjpProperties.Protocol.APR) {
                TomcatNative.requireUsableLibrary();
            }
            factory.addAdditionalTomcatConnectors(AjpConnector.create(switch (ajp.getProtocol()) {
                case APR -> AJP_APR;
                case NIO2 -> AJP_NIO2;
                case NIO -> AJP_NIO;
            }, ajp));
        };
    }

    /** The connectors of the running Tomcat, as observed, for the info endpoint. */
    static List<Map<String, Object>> describeConnectors(WebServer webServer) {
        return Connectors.describe(webServer instanceof TomcatWebServer ? ((TomcatWebServer) webServer).getTomcat() : null);
    }
}
