// SmarticoSim: the logic of `smartico-sim`, a local stand-in for Smartico's WebSocket server.
//
// Sans-I/O core: `SimServer` (every connection's `SimServerSession`, pending engagements, the
// received log, faults, scheduled pushes, the control protocol) takes decoded input and `now`
// and returns `SimAction`s; `SimHTTPRouter` turns HTTP requests into response bytes. The I/O
// wiring (`SimHTTPServer`, `SimControlServer`) drives them over Transport's `StreamListener`;
// `SimWebSocketListener` hands `WebSocketServer`'s connections to `SimRuntime`; `SimRunning`
// starts and stops everything.
// See docs/simulator.md.
