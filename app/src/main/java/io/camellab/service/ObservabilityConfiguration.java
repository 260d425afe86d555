package io.camellab.service;

import java.util.ArrayList;
import java.util.List;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import org.apache.camel.CamelContext;
import org.apache.camel.Endpoint;
import org.apache.camel.Route;
import org.apache.camel.api.management.ManagedCamelContext;
import org.apache.camel.api.management.mbean.ManagedRouteMBean;
import org.apache.camel.component.http.HttpEndpoint;
import org.apache.camel.spring.boot.CamelContextConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Prometheus metrics Spring Boot does not bind by itself: the camel-http connection pool and the
 * Camel exchange counters. Bound once Camel has started, when the endpoints have created their pools.
 * (camel-micrometer 3.22 is not on Maven Central, so on both stacks the counters come from camel-management.)
 */
@Configuration(proxyBeanMethods = false)
public class ObservabilityConfiguration {

    @Bean
    CamelContextConfiguration metricsBinding(MeterRegistry registry) {
        return new CamelContextConfiguration() {
            // Micrometer holds what its gauges and function counters read only weakly: without this
            // reference the route MBeans are collected and the meters read NaN after the next GC.
            private final List<ManagedRouteMBean> measuredRoutes = new ArrayList<>();

            @Override
            public void beforeApplicationStart(CamelContext camelContext) {
            }

            @Override
            public void afterApplicationStart(CamelContext camelContext) {
                bindHttpClientPool(camelContext, registry);
                measuredRoutes.addAll(bindExchangeCounters(camelContext, registry));
            }
        };
    }

    /** camel-http gives each endpoint its own pool; the service has one, the backend. */
    private static void bindHttpClientPool(CamelContext camelContext, MeterRegistry registry) {
        for (Endpoint endpoint : camelContext.getEndpoints()) {
            if (endpoint instanceof HttpEndpoint) {
                Stack.bindBackendPool((HttpEndpoint) endpoint, registry);
            }
        }
    }

    private static List<ManagedRouteMBean> bindExchangeCounters(CamelContext camelContext, MeterRegistry registry) {
        ManagedCamelContext managed = Stack.managed(camelContext);
        List<ManagedRouteMBean> measured = new ArrayList<>();
        for (Route route : camelContext.getRoutes()) {
            ManagedRouteMBean mbean = managed.getManagedRoute(route.getRouteId());
            measured.add(mbean);
            FunctionCounter.builder("camel.exchanges", mbean, ManagedRouteMBean::getExchangesTotal)
                    .tag("route", route.getRouteId()).description("Exchanges completed or failed").register(registry);
            FunctionCounter.builder("camel.exchanges.failed", mbean, ManagedRouteMBean::getExchangesFailed)
                    .tag("route", route.getRouteId()).description("Exchanges failed").register(registry);
            Gauge.builder("camel.exchanges.inflight", mbean, ManagedRouteMBean::getExchangesInflight)
                    .tag("route", route.getRouteId()).description("Exchanges in flight").register(registry);
        }
        return measured;
    }
}
