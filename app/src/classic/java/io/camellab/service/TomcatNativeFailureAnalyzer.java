package io.camellab.service;

import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/** Turns a missing or too old native library into Spring Boot's "APPLICATION FAILED TO START" report. */
class TomcatNativeFailureAnalyzer extends AbstractFailureAnalyzer<TomcatNativeUnavailableException> {

    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, TomcatNativeUnavailableException cause) {
        String action = "Install Tomcat Native " + cause.getRequiredVersion() + " or newer 1.x (app/native/build-tcnative"
                + " builds it from the source shipped with this Tomcat release) and point -Djava.library.path at the"
                + " folder holding " + cause.getLibraryFile() + ", or set lab.ajp.protocol=NIO.";
        return new FailureAnalysis(cause.getMessage(), action, cause);
    }
}
