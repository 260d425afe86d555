package io.camellab.service;

import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * How much the audit logger writes per request, the write-up's workload knob: the original service
 * logged the request headers, the backend's whole body and the pretty-printed reply on every request
 * (with Camel's tracer on: camel.springboot.tracing). Off by default: one request line, one reply line.
 */
@ConfigurationProperties("lab.audit")
public class AuditProperties {

    /** The request line also lists the request's HTTP headers. */
    private boolean headers;

    /** A line with the backend's reply, its whole body. */
    private boolean backendBody;

    /** The reply line's JSON pretty-printed (several lines), as the original service logged it. */
    private boolean prettyReply;

    public boolean isHeaders() {
        return headers;
    }

    public void setHeaders(boolean headers) {
        this.headers = headers;
    }

    public boolean isBackendBody() {
        return backendBody;
    }

    public void setBackendBody(boolean backendBody) {
        this.backendBody = backendBody;
    }

    public boolean isPrettyReply() {
        return prettyReply;
    }

    public void setPrettyReply(boolean prettyReply) {
        this.prettyReply = prettyReply;
    }
}
