package io.camellab.service;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executor;

import org.apache.catalina.connector.Connector;
import org.apache.catalina.startup.Tomcat;
import org.apache.coyote.AbstractProtocol;

/** The connectors of the running Tomcat, as observed, for the info endpoint (the same on Tomcat 9 and 11). */
final class Connectors {

    private Connectors() {
    }

    /** Each connector's protocol, port, state, sizing and the executor its requests run on; none without a Tomcat. */
    static List<Map<String, Object>> describe(Tomcat tomcat) {
        List<Map<String, Object>> described = new ArrayList<>();
        if (tomcat == null) {
            return described;
        }
        for (Connector connector : tomcat.getService().findConnectors()) {
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
                entry.put("executor", executorName(protocol.getExecutor()));
            }
            entry.put("compression", connector.getProperty("compression"));
            described.add(entry);
        }
        return described;
    }

    /** True when every connector hands its requests to virtual threads (Tomcat's executors for them say so in their names). */
    static boolean virtualThreads(Tomcat tomcat) {
        List<Map<String, Object>> connectors = describe(tomcat);
        return !connectors.isEmpty() && connectors.stream()
                .allMatch(c -> String.valueOf(c.get("executor")).contains("VirtualThread"));
    }

    private static String executorName(Executor executor) {
        return executor == null ? null : executor.getClass().getName();
    }
}
