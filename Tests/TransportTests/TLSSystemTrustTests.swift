import Foundation
import Testing
import SmarticoTestSupport
@testable import Transport

/// `.system` trust roots read from a hashed directory on demand instead of the whole bundle at once.
@Suite struct TLSSystemTrustTests {
    /// A directory holding `certificates` under their OpenSSL subject hashes (`1a2b3c4d.0`), as
    /// `update-ca-certificates`/`c_rehash` lay out `/etc/ssl/certs`.
    func hashedDirectory(_ certificates: [String]) async throws -> String {
        let directory = try TestDirectory.make(prefix: "smartico-hashdir").path
        for path in certificates {
            let output = try await TestCertificateAuthority.runOpenSSL(["x509", "-hash", "-noout", "-in", path])
            let hash = String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            try FileManager.default.copyItem(atPath: path, toPath: "\(directory)/\(hash).0")
        }
        return directory
    }

    func systemContext(_ source: TLSContext.SystemTrustSource) async throws -> TLSContext {
        try await BlockingPool.shared.run { () throws -> TLSContext in
            try TLSContext(client: TLSClientConfiguration(trustRoots: .system), systemTrust: source)
        }
    }

    @Test func hashedDirectoryVerifiesAndReadsOnlyTheCAAChainNames() async throws {
        let ca = try await TestCertificateAuthority.make()
        let otherCA = try await TestCertificateAuthority.make(commonName: "Someone Else CA")
        let thirdCA = try await TestCertificateAuthority.make(commonName: "Unused Third CA")
        let trusted = try await hashedDirectory([ca.certificatePath, otherCA.certificatePath, thirdCA.certificatePath])
        let untrusted = try await hashedDirectory([otherCA.certificatePath])
        defer {
            ca.remove(); otherCA.remove(); thirdCA.remove()
            try? FileManager.default.removeItem(atPath: trusted)
            try? FileManager.default.removeItem(atPath: untrusted)
        }
        let certificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"])
        try await withLoop { loop in
            // The leaf alone: the client must find the issuer in the directory.
            let server = try await TLSEchoServer.start(on: loop, certificate: certificate, sendChain: false)
            let context = try await systemContext(.hashedDirectories(trusted))
            #expect(context.storedTrustObjectCount == 0, "nothing is read before a chain needs it")
            let client = try await StreamConnection.connect(host: "localhost", port: server.port, tls: context, on: loop)
            try await expectGreetingAndEcho(client, loop: loop)
            #expect(context.storedTrustObjectCount == 1, "only the issuing CA was read, not the three")
            try await loop.submit { client.close() }

            // A directory without the issuer: refused as an unknown CA, as with a CA file.
            let error = await expectTLSFailure(
                host: "localhost", port: server.port, context: try await systemContext(.hashedDirectories(untrusted)),
                loop: loop)
            guard case .certificateVerifyFailed(let name, _, let code, _)? = error else {
                Issue.record("expected certificateVerifyFailed, got \(String(describing: error))")
                return
            }
            #expect(name == "localhost")
            #expect(TLSError.unknownCACodes.contains(code))
            try await loop.submit { server.listener.close() }
        }
    }

    @Test func systemTrustSourcePrefersAHashedDirectoryUnlessAFileIsNamed() throws {
        let hashed = try TestDirectory.make(prefix: "smartico-hashdir").path
        let plain = try TestDirectory.make(prefix: "smartico-plaindir").path
        defer {
            try? FileManager.default.removeItem(atPath: hashed)
            try? FileManager.default.removeItem(atPath: plain)
        }
        try "x".write(toFile: hashed + "/ca-bundle.crt", atomically: true, encoding: .utf8)
        try "x".write(toFile: hashed + "/9d2b1c3a.0", atomically: true, encoding: .utf8)
        // A bundle and a CRL's hashed name only: no hashed certificate.
        try "x".write(toFile: plain + "/ca-bundle.crt", atomically: true, encoding: .utf8)
        try "x".write(toFile: plain + "/9d2b1c3a.r0", atomically: true, encoding: .utf8)

        func source(_ environment: [String: String], defaultDirectory: String) -> TLSContext.SystemTrustSource {
            TLSContext.systemTrustSource(environment: { environment[$0] }, defaultDirectory: defaultDirectory)
        }
        #expect(source([:], defaultDirectory: hashed) == .hashedDirectories(hashed))
        #expect(source([:], defaultDirectory: plain) == .defaultPaths)
        #expect(source([:], defaultDirectory: hashed + "/missing") == .defaultPaths)
        // SSL_CERT_FILE: the operator named a file; OpenSSL's defaults read it.
        #expect(source(["SSL_CERT_FILE": "/etc/my-roots.pem"], defaultDirectory: hashed) == .defaultPaths)
        // SSL_CERT_DIR replaces the default directory; a list counts when any member is hashed.
        #expect(source(["SSL_CERT_DIR": plain], defaultDirectory: hashed) == .defaultPaths)
        #expect(source(["SSL_CERT_DIR": "\(plain):\(hashed)"], defaultDirectory: plain)
            == .hashedDirectories("\(plain):\(hashed)"))
        #expect(source(["SSL_CERT_DIR": ""], defaultDirectory: hashed) == .hashedDirectories(hashed))
    }

    @Test func hashedCertificateNames() {
        for name in ["9d2b1c3a.0", "9D2B1C3A.1", "00000000.12"] {
            #expect(TLSContext.isHashedCertificateName(Array(name.utf8)), "\(name)")
        }
        for name in ["9d2b1c3a.r0", "9d2b1c3a.", "9d2b1c3a", "9d2b1c3g.0", "ca-certificates.crt", "9d2b1c3a0.0", ""] {
            #expect(!TLSContext.isHashedCertificateName(Array(name.utf8)), "\(name)")
        }
    }
}
