package io.camellab.service;

import java.time.Duration;

import javax.validation.constraints.AssertTrue;
import javax.validation.constraints.Max;
import javax.validation.constraints.Min;
import javax.validation.constraints.NotNull;

import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.validation.annotation.Validated;

/**
 * The AJP connector HTTPD proxies to on the tuned machine, sized on its own: Spring Boot's
 * server.tomcat.* size the HTTP connector only. Unset sizes keep Tomcat's AJP defaults.
 */
@Validated
@ConfigurationProperties("lab.ajp")
public class AjpProperties {

    /** NIO2: asynchronous channels; APR: the Tomcat Native library's, this stack's only. */
    public enum Protocol { NIO, NIO2, APR }

    private boolean enabled;

    @Min(0)
    @Max(65535)
    private int port = 8009;

    /** Bind address; unset keeps Tomcat's default, the loopback address. */
    private String address;

    /** Shared with HTTPD's ProxyPass secret=; Tomcat refuses AJP without one since 9.0.31. */
    private String secret;

    @NotNull
    private Protocol protocol = Protocol.NIO;

    @Min(1)
    private Integer maxThreads;

    @Min(0)
    private Integer minSpareThreads;

    @Min(1)
    private Integer maxConnections;

    @Min(1)
    private Integer acceptCount;

    /** Unset: Tomcat's AJP default, no timeout. */
    private Duration connectionTimeout;

    @AssertTrue(message = "lab.ajp.secret must be set when lab.ajp.enabled=true: Tomcat requires an AJP secret (and HTTPD sends it with ProxyPass ... secret=)")
    public boolean isSecretSetWhenEnabled() {
        return !enabled || (secret != null && !secret.isBlank());
    }

    public boolean isEnabled() { return enabled; }
    public void setEnabled(boolean enabled) { this.enabled = enabled; }
    public int getPort() { return port; }
    public void setPort(int port) { this.port = port; }
    public String getAddress() { return address; }
    public void setAddress(String address) { this.address = address; }
    public String getSecret() { return secret; }
    public void setSecret(String secret) { this.secret = secret; }
    public Protocol getProtocol() { return protocol; }
    public void setProtocol(Protocol protocol) { this.protocol = protocol; }
    public Integer getMaxThreads() { return maxThreads; }
    public void setMaxThreads(Integer maxThreads) { this.maxThreads = maxThreads; }
    public Integer getMinSpareThreads() { return minSpareThreads; }
    public void setMinSpareThreads(Integer minSpareThreads) { this.minSpareThreads = minSpareThreads; }
    public Integer getMaxConnections() { return maxConnections; }
    public void setMaxConnections(Integer maxConnections) { this.maxConnections = maxConnections; }
    public Integer getAcceptCount() { return acceptCount; }
    public void setAcceptCount(Integer acceptCount) { this.acceptCount = acceptCount; }
    public Duration getConnectionTimeout() { return connectionTimeout; }
    public void setConnectionTimeout(Duration connectionTimeout) { this.connectionTimeout = connectionTimeout; }
}
