package io.camellab.service;

import java.net.SocketTimeoutException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.httpcomponents.hc5.PoolingHttpClientConnectionManagerMetricsBinder;
import org.apache.camel.CamelContext;
import org.apache.camel.api.management.ManagedCamelContext;
import org.apache.camel.component.http.HttpEndpoint;
import org.apache.camel.model.rest.RestConfigurationDefinition;
import org.apache.catalina.startup.Tomcat;
import org.apache.hc.client5.http.ConnectTimeoutException;
import org.apache.hc.client5.http.impl.io.PoolingHttpClientConnectionManager;
import org.apache.hc.core5.http.ConnectionRequestTimeoutException;
import org.springframework.boot.tomcat.TomcatWebServer;
import org.springframework.boot.web.server.servlet.context.ServletWebServerApplicationContext;
import org.springframework.context.ApplicationContext;
import org.springframework.core.task.SimpleAsyncTaskExecutor;
import org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor;

/**
 * What the shared code (../src/main/java) needs that differs between the two stacks, for the modern one:
 * Spring Boot 4, Camel 4, Tomcat 11 (no APR: removed in 10.1), Apache HttpClient 5. The classic build
 * has a class of the same name and members (../src/classic).
 */
final class Stack {

    static final String NAME = "modern";

    /** The backend call's timeouts, told apart from its other I/O failures. */
    @SuppressWarnings("unchecked")
    static final Class<? extends Throwable>[] BACKEND_TIMEOUTS = new Class[] {SocketTimeoutException.class, ConnectTimeoutException.class};

    /** No connection of the backend pool came free in time. */
    static final Class<? extends Throwable> BACKEND_POOL_EXHAUSTED = ConnectionRequestTimeoutException.class;

    private Stack() {
    }

    /** REST over Camel's platform-http on Spring MVC (Camel 4 has no servlet starter here), under /camel. */
    static RestConfigurationDefinition rest(RestConfigurationDefinition rest) {
        return rest.component("platform-http").contextPath("/camel");
    }

    static ManagedCamelContext managed(CamelContext camel) {
        return camel.getCamelContextExtension().getContextPlugin(ManagedCamelContext.class);
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

    /**
     * What runs the route: platform-http hands each request from Tomcat's thread to Spring's application
     * task executor (a pool of spring.task.execution.pool.core-size threads, 8 unless set, with an
     * unbounded queue; or a new virtual thread per request with spring.threads.virtual.enabled).
     * Whether its threads are virtual is observed by running a task on it.
     */
    static Map<String, Object> routeExecutor(ApplicationContext context) {
        Map<String, Object> described = new LinkedHashMap<>();
        Object executor = context.containsBean("applicationTaskExecutor") ? context.getBean("applicationTaskExecutor") : null;
        described.put("executor", executor == null ? null : executor.getClass().getName());
        if (executor instanceof ThreadPoolTaskExecutor pool) {
            described.put("corePoolSize", pool.getCorePoolSize());
            described.put("maxPoolSize", pool.getMaxPoolSize());
            described.put("queueCapacity", pool.getQueueCapacity());
        } else if (executor instanceof SimpleAsyncTaskExecutor simple) {
            described.put("concurrencyLimit", simple.getConcurrencyLimit());
        }
        described.put("virtualThreads", executor instanceof Executor runner && runsOnVirtualThreads(runner));
        return described;
    }

    private static boolean runsOnVirtualThreads(Executor executor) {
        try {
            return "java.lang.VirtualThread".equals(CompletableFuture
                    .supplyAsync(() -> Thread.currentThread().getClass().getName(), executor).get(2, TimeUnit.SECONDS));
        } catch (Exception e) {
            return false;
        }
    }

    /** Tomcat 11 has no APR connector, so never a native library. */
    static String nativeLibrary() {
        return null;
    }

    static String nativeLibraryRequired() {
        return null;
    }
}
