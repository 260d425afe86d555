package io.camellab.service;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.Appender;
import ch.qos.logback.core.AsyncAppenderBase;
import org.apache.camel.CamelContext;
import org.apache.camel.component.http.HttpComponent;
import org.apache.catalina.util.ServerInfo;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringBootVersion;
import org.springframework.boot.actuate.info.Info;
import org.springframework.boot.actuate.info.InfoContributor;
import org.springframework.context.ApplicationContext;
import org.springframework.stereotype.Component;

/**
 * What this JVM really runs, observed rather than configured: the lab's status command and report
 * read it from /actuator/info to show how the two machines differ.
 */
@Component
public class LabInfoContributor implements InfoContributor {

    /** GC MXBean names as the JVM reports them, mapped to the collector's usual name. */
    private static final Map<String, String> COLLECTORS = Map.of(
            "Copy", "Serial", "MarkSweepCompact", "Serial",
            "G1 Young Generation", "G1", "G1 Old Generation", "G1",
            "PS Scavenge", "Parallel", "PS MarkSweep", "Parallel",
            "ZGC Cycles", "ZGC", "ZGC Pauses", "ZGC",
            "Shenandoah Cycles", "Shenandoah", "Shenandoah Pauses", "Shenandoah");

    private final ApplicationContext context;
    private final CamelContext camel;
    private final String backendUrl;

    public LabInfoContributor(ApplicationContext context, CamelContext camel, @Value("${lab.backend.url}") String backendUrl) {
        this.context = context;
        this.camel = camel;
        this.backendUrl = backendUrl;
    }

    @Override
    public void contribute(Info.Builder builder) {
        builder.withDetail("stack", stack());
        Map<String, Object> tomcat = new LinkedHashMap<>();
        tomcat.put("version", ServerInfo.getServerNumber());
        tomcat.put("nativeLibrary", Stack.nativeLibrary());
        tomcat.put("nativeLibraryRequired", Stack.nativeLibraryRequired());
        tomcat.put("connectors", Connectors.describe(Stack.tomcat(context)));
        builder.withDetail("tomcat", tomcat);
        builder.withDetail("jvm", jvm());
        builder.withDetail("logging", logging());
        builder.withDetail("backend", backend());
    }

    /** Which build serves, read from the libraries that run rather than from the build's own file. */
    private Map<String, Object> stack() {
        Map<String, Object> stack = new LinkedHashMap<>();
        stack.put("name", Stack.NAME);
        stack.put("springBoot", SpringBootVersion.getVersion());
        stack.put("camel", camel.getVersion());
        stack.put("tomcat", ServerInfo.getServerNumber());
        stack.put("java", Runtime.version().toString());
        Map<String, Object> routeExecutor = Stack.routeExecutor(context);
        stack.put("routeExecutor", routeExecutor);
        // On: every connector and whatever runs the route hand their work to virtual threads.
        stack.put("virtualThreads", Connectors.virtualThreads(Stack.tomcat(context)) && Boolean.TRUE.equals(routeExecutor.get("virtualThreads")));
        return stack;
    }

    /** The backend the route calls, and the camel-http pool it calls it through, as the live component has it. */
    private Map<String, Object> backend() {
        Map<String, Object> backend = new LinkedHashMap<>();
        backend.put("url", backendUrl);
        HttpComponent http = camel.getComponent("http", HttpComponent.class);
        backend.put("maxTotalConnections", http.getMaxTotalConnections());
        backend.put("connectionsPerRoute", http.getConnectionsPerRoute());
        return backend;
    }

    private static Map<String, Object> jvm() {
        List<String> beans = new ArrayList<>();
        String collector = "unknown";
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            beans.add(gc.getName());
            collector = COLLECTORS.getOrDefault(gc.getName(), collector);
        }
        Map<String, Object> jvm = new LinkedHashMap<>();
        jvm.put("version", System.getProperty("java.runtime.version"));
        jvm.put("gc", collector);
        jvm.put("gcBeans", beans);
        jvm.put("heapMaxBytes", Runtime.getRuntime().maxMemory());
        // Container-aware: the cgroup's memory limit when the JVM runs under one.
        jvm.put("memoryLimitBytes", ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getTotalMemorySize());
        jvm.put("availableProcessors", Runtime.getRuntime().availableProcessors());
        jvm.put("inputArguments", ManagementFactory.getRuntimeMXBean().getInputArguments());
        return jvm;
    }

    /** Async means every appender the audit logger writes through is an AsyncAppender. */
    private static Map<String, Object> logging() {
        LoggerContext loggerContext = (LoggerContext) LoggerFactory.getILoggerFactory();
        List<String> appenders = new ArrayList<>();
        boolean allAsync = true;
        for (Logger logger = loggerContext.getLogger(Auditor.LOGGER); logger != null; logger = parent(loggerContext, logger)) {
            for (Iterator<Appender<ILoggingEvent>> it = logger.iteratorForAppenders(); it.hasNext();) {
                Appender<ILoggingEvent> appender = it.next();
                appenders.add(appender.getName() + " (" + appender.getClass().getSimpleName() + ")");
                allAsync &= appender instanceof AsyncAppenderBase;
            }
            if (!logger.isAdditive()) {
                break;
            }
        }
        Map<String, Object> logging = new LinkedHashMap<>();
        logging.put("async", allAsync && !appenders.isEmpty());
        logging.put("auditAppenders", appenders);
        return logging;
    }

    private static Logger parent(LoggerContext loggerContext, Logger logger) {
        String name = logger.getName();
        if (Logger.ROOT_LOGGER_NAME.equals(name)) {
            return null;
        }
        int dot = name.lastIndexOf('.');
        return loggerContext.getLogger(dot < 0 ? Logger.ROOT_LOGGER_NAME : name.substring(0, dot));
    }
}
