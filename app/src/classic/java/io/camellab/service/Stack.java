package io.camellab.service;

import java.net.SocketTimeoutException;
import java.util.Map;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.httpcomponents.PoolingHttpClientConnectionManagerMetricsBinder;
import org.apache.camel.CamelContext;
import org.apache.camel.api.management.ManagedCamelContext;
import org.apache.camel.component.http.HttpEndpoint;
import org.apache.camel.model.rest.RestConfigurationDefinition;
import org.apache.catalina.startup.Tomcat;
import org.apache.http.conn.ConnectTimeoutException;
import org.apache.http.conn.ConnectionPoolTimeoutException;
import org.apache.http.impl.conn.PoolingHttpClientConnectionManager;
import org.springframework.boot.web.embedded.tomcat.TomcatWebServer;
import org.springframework.boot.web.servlet.context.ServletWebServerApplicationContext;
import org.springframework.context.ApplicationContext;

/**
 * What the shared code (src/main/java) needs that differs between the two stacks, for the classic one:
 * Spring Boot 2.7, Camel 3, Tomcat 9 with APR, Apache HttpClient 4. The modern build (modern/) has a
 * class of the same name and members for Boot 4, Camel 4, Tomcat 11 and HttpClient 5.
 */
final class Stack {

    static final String NAME = "classic";

    /** The backend call's timeouts, told apart from its other I/O failures. */
    @SuppressWarnings("unchecked")
    static final Class<? extends Throwable>[] BACKEND_TIMEOUTS = new Class[] {SocketTimeoutException.class, ConnectTimeoutException.class};

    /** No connection of the backend pool came free in time. */
    static final Class<? extends Throwable> BACKEND_POOL_EXHAUSTED = ConnectionPoolTimeoutException.class;

    private Stack() {
    }

    /** REST over the Camel servlet, mapped at /camel/* (config/application.properties). */
    static RestConfigurationDefinition rest(RestConfigurationDefinition rest) {
        return rest.component("servlet");
    }

    static ManagedCamelContext managed(CamelContext camel) {
        return camel.getExtension(ManagedCamelContext.class);
    }

    static void bindBackendPool(HttpEndpoint endpoint, MeterRegistry registry) {
        if (endpoint.getClientConnectionManager() instanceof PoolingHttpClientConnectionManager) {
            new PoolingHttpClientConnectionManagerMetricsBinder(
                    (PoolingHttpClientConnectionManager) endpoint.getClientConnectionManager(),
                    "camel-http", Tags.of("endpoint", endpoint.getHttpUri().toString())).bindTo(registry);
        }
    }

    /** The embedded Tomcat of a servlet application context; null in any other. */
    static Tomcat tomcat(ApplicationContext context) {
        return context instanceof ServletWebServerApplicationContext
                && ((ServletWebServerApplicationContext) context).getWebServer() instanceof TomcatWebServer
                ? ((TomcatWebServer) ((ServletWebServerApplicationContext) context).getWebServer()).getTomcat() : null;
    }

    /** What runs the route: the Camel servlet runs it on the Tomcat connector's own thread. */
    static Map<String, Object> routeExecutor(ApplicationContext context) {
        return Map.of("executor", "the Tomcat connector's thread (Camel servlet)", "virtualThreads", false);
    }

    static String nativeLibrary() {
        return TomcatNative.loadedVersion();
    }

    static String nativeLibraryRequired() {
        return TomcatNative.requiredVersion();
    }
}
