package io.camellab.service;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.catalina.connector.Connector;
import org.apache.coyote.AbstractProtocol;
import org.apache.coyote.ajp.AbstractAjpProtocol;
import org.springframework.boot.web.embedded.tomcat.TomcatServletWebServerFactory;
import org.springframework.boot.web.embedded.tomcat.TomcatWebServer;
import org.springframework.boot.web.server.WebServer;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The stack-specific part of the service (Tomcat 9 embedded in Spring Boot 2.7): adds the AJP
 * connector, NIO or APR, with its own sizing (lab.ajp.*), so that sizing the connector HTTPD talks
 * to does not also grow the other one's thread pool. Spring Boot registers Tomcat's
 * AprLifecycleListener itself whenever the native library loads.
 */
@Configuration(proxyBeanMethods = false)
public class TomcatConnectorConfiguration {

    static final String AJP_NIO = "org.apache.coyote.ajp.AjpNioProtocol";
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
            factory.addAdditionalTomcatConnectors(ajpConnector(ajp));
        };
    }

    private static Connector ajpConnector(AjpProperties ajp) {
        Connector connector = new Connector(ajp.getProtocol() == AjpProperties.Protocol.APR ? AJP_APR : AJP_NIO);
        connector.setPort(ajp.getPort());
        AbstractAjpProtocol<?> protocol = (AbstractAjpProtocol<?>) connector.getProtocolHandler();
        if (ajp.getAddress() != null) {
            protocol.setAddress(resolve(ajp.getAddress()));
        }
        protocol.setSecret(ajp.getSecret());
        protocol.setSecretRequired(true);
        if (ajp.getMaxThreads() != null) {
            protocol.setMaxThreads(ajp.getMaxThreads());
        }
        if (ajp.getMinSpareThreads() != null) {
            protocol.setMinSpareThreads(ajp.getMinSpareThreads());
        }
        if (ajp.getMaxConnections() != null) {
            protocol.setMaxConnections(ajp.getMaxConnections());
        }
        if (ajp.getAcceptCount() != null) {
            protocol.setAcceptCount(ajp.getAcceptCount());
        }
        if (ajp.getConnectionTimeout() != null) {
            protocol.setConnectionTimeout((int) ajp.getConnectionTimeout().toMillis());
        }
        return connector;
    }

    private static InetAddress resolve(String address) {
        try {
            return InetAddress.getByName(address);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("lab.ajp.address: cannot resolve [" + address + "]", e);
        }
    }

    /** The connectors of the running Tomcat, as observed, for the info endpoint. */
    static List<Map<String, Object>> describeConnectors(WebServer webServer) {
        List<Map<String, Object>> described = new ArrayList<>();
        if (!(webServer instanceof TomcatWebServer)) {
            return described;
        }
        for (Connector connector : ((TomcatWebServer) webServer).getTomcat().getService().findConnectors()) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("protocol", connector.getProtocolHandlerClassName());
            entry.put("port", connector.getLocalPort());
            entry.put("state", connector.getStateName());
            if (connector.getProtocolHandler() instanceof AbstractProtocol) {
                AbstractProtocol<?> protocol = (AbstractProtocol<?>) connector.getProtocolHandler();
                entry.put("address", protocol.getAddress() == null ? null : protocol.getAddress().getHostAddress());
                entry.put("maxThreads", protocol.getMaxThreads());
                entry.put("minSpareThreads", protocol.getMinSpareThreads());
                entry.put("maxConnections", protocol.getMaxConnections());
                entry.put("acceptCount", protocol.getAcceptCount());
                entry.put("connectionTimeout", protocol.getConnectionTimeout());
            }
            entry.put("compression", connector.getProperty("compression"));
            described.add(entry);
        }
        return described;
    }
}
