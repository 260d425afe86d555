package io.camellab.service;

import java.net.InetAddress;
import java.net.UnknownHostException;

import org.apache.catalina.connector.Connector;
import org.apache.coyote.ajp.AbstractAjpProtocol;

/**
 * The AJP connector HTTPD proxies to, sized on its own (lab.ajp.*), so that sizing it does not also grow
 * the HTTP connector's thread pool; the same on Tomcat 9 and 11. Which protocol, each stack decides.
 */
final class AjpConnector {

    private AjpConnector() {
    }

    /** A connector of the given AJP protocol class, sized by lab.ajp.* (AjpProperties: each stack has its own). */
    static Connector create(String protocolClass, AjpProperties ajp) {
        Connector connector = new Connector(protocolClass);
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

}
