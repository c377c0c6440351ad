import Foundation
import Transport
import SmarticoTestSupport

/// A throwaway certificate authority made with the `openssl` command in a fresh temp directory, for tests
/// that need real TLS: a CA, server and client certificates (valid, expired, for other names).
///
/// ```swift
/// let ca = try await TestCertificateAuthority.make()
/// defer { ca.remove() }
/// let server = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"])
/// // ca.certificatePath (trust it), server.certificatePath / server.keyPath (serve it)
/// ```
/// Issuing uses `openssl ca` (its database is per CA), so one CA issues one certificate at a time
/// (the type is an actor).
actor TestCertificateAuthority {
    /// A certificate and its key, as PEM files.
    struct Issued: Sendable {
        let certificatePath: String
        let keyPath: String
        /// Leaf followed by the CA certificate (what a server should send).
        let chainPath: String
    }

    enum Failure: Error, CustomStringConvertible {
        case command(arguments: [String], status: Int32, output: String)
        var description: String {
            switch self {
            case .command(let arguments, let status, let output):
                return "openssl \(arguments.joined(separator: " ")) exited with \(status): \(output)"
            }
        }
    }

    nonisolated let directory: String
    nonisolated let certificatePath: String
    nonisolated let keyPath: String
    private var counter = 0

    private init(directory: String) {
        self.directory = directory
        self.certificatePath = directory + "/ca.pem"
        self.keyPath = directory + "/ca.key"
    }

    /// Makes a new CA (EC P-256, valid 10 years) in a new temp directory.
    static func make(commonName: String = "Smartico Test CA") async throws -> TestCertificateAuthority {
        let directory = try TestDirectory.make(prefix: "smartico-ca").path
        let ca = TestCertificateAuthority(directory: directory)
        try FileManager.default.createDirectory(atPath: directory + "/newcerts", withIntermediateDirectories: true)
        try "".write(toFile: directory + "/index.txt", atomically: true, encoding: .utf8)
        try "1000\n".write(toFile: directory + "/serial", atomically: true, encoding: .utf8)
        let config = """
            [ ca ]
            default_ca = testca
            [ testca ]
            dir = \(directory)
            database = \(directory)/index.txt
            new_certs_dir = \(directory)/newcerts
            serial = \(directory)/serial
            default_md = sha256
            policy = policy_any
            unique_subject = no
            [ policy_any ]
            commonName = supplied
            organizationName = optional
            """
        try config.write(toFile: directory + "/ca.cnf", atomically: true, encoding: .utf8)
        try await runOpenSSL([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", ca.keyPath, "-out", ca.certificatePath, "-days", "3650", "-subj", "/CN=\(commonName)",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
        return ca
    }

    /// Issues a certificate signed by this CA. `validity` defaults to "now for 30 days"; pass
    /// `("20190101000000Z", "20200101000000Z")` for an expired one. Usable for server and client auth.
    func issue(
        commonName: String, dnsNames: [String] = [], ipAddresses: [String] = [],
        validity: (start: String, end: String)? = nil
    ) async throws -> Issued {
        counter += 1
        let base = "\(directory)/cert\(counter)"
        let extensions = directory + "/ext\(counter).cnf"
        var san = dnsNames.map { "DNS:\($0)" } + ipAddresses.map { "IP:\($0)" }
        if san.isEmpty { san = ["DNS:\(commonName)"] }
        try """
            subjectAltName=\(san.joined(separator: ","))
            basicConstraints=CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=serverAuth,clientAuth
            """.write(toFile: extensions, atomically: true, encoding: .utf8)
        try await TestCertificateAuthority.runOpenSSL([
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", base + ".key", "-out", base + ".csr", "-subj", "/CN=\(commonName)",
        ])
        var arguments = [
            "ca", "-batch", "-notext", "-config", directory + "/ca.cnf", "-cert", certificatePath, "-keyfile", keyPath,
            "-in", base + ".csr", "-out", base + ".pem", "-extfile", extensions,
        ]
        if let validity {
            arguments += ["-startdate", validity.start, "-enddate", validity.end]
        } else {
            arguments += ["-days", "30"]
        }
        try await TestCertificateAuthority.runOpenSSL(arguments)
        let leaf = try String(contentsOfFile: base + ".pem", encoding: .utf8)
        let caPEM = try String(contentsOfFile: certificatePath, encoding: .utf8)
        try (leaf + caPEM).write(toFile: base + "-chain.pem", atomically: true, encoding: .utf8)
        return Issued(certificatePath: base + ".pem", keyPath: base + ".key", chainPath: base + "-chain.pem")
    }

    /// The SPKI pin (base64 SHA-256 of the DER SubjectPublicKeyInfo) of a PEM certificate, computed by the
    /// openssl command (an independent check of the library's own computation).
    static func spkiPin(ofCertificate path: String) async throws -> String {
        let der = path + ".spki.der"
        let pub = path + ".pub.pem"
        try await runOpenSSL(["x509", "-in", path, "-noout", "-pubkey", "-out", pub])
        try await runOpenSSL(["pkey", "-pubin", "-in", pub, "-outform", "DER", "-out", der])
        let output = try await runOpenSSL(["dgst", "-sha256", "-binary", der], captureBinary: true)
        return Data(output).base64EncodedString()
    }

    /// Deletes the directory.
    nonisolated func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `openssl` on the blocking pool (reading its output and waiting for it block), never on a
    /// cooperative thread.
    @discardableResult
    static func runOpenSSL(_ arguments: [String], captureBinary: Bool = false) async throws -> [UInt8] {
        let (status, bytes) = try await BlockingPool.shared.run { () throws -> (Int32, [UInt8]) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try process.runSerialized()
            let bytes = readToEnd(fd: output.fileHandleForReading.fileDescriptor)
            process.waitForExit(timeout: .seconds(60))
            return (process.terminationStatus, bytes)
        }
        guard status == 0 else {
            throw Failure.command(arguments: arguments, status: status, output: String(decoding: bytes, as: UTF8.self))
        }
        return bytes
    }
}
