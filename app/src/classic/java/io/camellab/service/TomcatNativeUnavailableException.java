package io.camellab.service;

/** APR was requested but the Tomcat Native library is missing, too old or of the wrong line. */
public class TomcatNativeUnavailableException extends IllegalStateException {

    private final String foundVersion;
    private final String requiredVersion;
    private final String libraryPath;
    private final String libraryFile;

    TomcatNativeUnavailableException(String foundVersion, String requiredVersion, String libraryPath,
            String libraryFile) {
        super(foundVersion == null
                ? "lab.ajp.protocol=APR: the Tomcat Native library (" + libraryFile + ") could not be loaded from"
                        + " java.library.path [" + libraryPath + "]; this Tomcat needs version " + requiredVersion
                        + " or newer (1.x)"
                : "lab.ajp.protocol=APR: the Tomcat Native library (" + libraryFile + ") found on java.library.path ["
                        + libraryPath + "] is version " + foundVersion + "; this Tomcat needs " + requiredVersion
                        + " or newer (1.x)");
        this.foundVersion = foundVersion;
        this.requiredVersion = requiredVersion;
        this.libraryPath = libraryPath;
        this.libraryFile = libraryFile;
    }

    public String getFoundVersion() { return foundVersion; }
    public String getRequiredVersion() { return requiredVersion; }
    public String getLibraryPath() { return libraryPath; }
    public String getLibraryFile() { return libraryFile; }
}
