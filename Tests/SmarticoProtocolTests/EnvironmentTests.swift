import Testing
import SmarticoProtocol

@Suite struct EnvironmentTests {
    @Test func routingFromTheLabelKey() {
        let e2 = SmarticoEnvironment(labelKey: "d78934f3-1d8b-461b-9e8f-287aae43c860-2")
        #expect(e2.environment == 2 && e2.labelKeyForInit == "d78934f3-1d8b-461b-9e8f-287aae43c860")
        #expect(e2.apiHost == "api.smartico.ai" && e2.publicAPIHost == "papi.smartico.ai" && e2.imageHost == "img.smr.vc")
        let e3 = SmarticoEnvironment(labelKey: "d78934f3-1d8b-461b-9e8f-287aae43c860-3")
        #expect(e3.apiHost == "api3.smartico.ai" && e3.publicAPIEndpoint == "https://papi3.smartico.ai/services/public")
        #expect(e3.imageHost == "img3.smr.vc")
        #expect(e3.webSocketURL(domain: "com.example.app", version: "1.2.29")
                == "wss://api3.smartico.ai/websocket/services?master&domain=com.example.app&version=1.2.29")
        let plain = SmarticoEnvironment(labelKey: "6816ba80-2967-4efb-a60c-694c72b03197")
        #expect(plain.environment == nil && plain.labelKeyForInit == "6816ba80-2967-4efb-a60c-694c72b03197")
        #expect(plain.apiHost == "api.smartico.ai")
        #expect(SmarticoEnvironment(labelKey: "d78934f3-1d8b-461b-9e8f-287aae43c860-1").apiHost == "api.smartico.ai")
        #expect(e2.avatarURL(avatarID: "17404556") == "https://img.smr.vc/avatar/17404556")
    }
}
