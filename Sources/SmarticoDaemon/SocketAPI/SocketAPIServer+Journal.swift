import SmarticoProtocol
import Transport

// The store's side of the subscriptions: journal pages, durable cursors claimed, acknowledged and
// forgotten. Each runs as a task on the loop's executor and hands its result back to the loop:
// to the ``SubscriptionBook`` (pages, claimed cursors) or as the request's answer.
extension SocketAPIServer {
    /// Reads a page from the journal (without a store: what was published meanwhile is gone) and
    /// hands it to the book.
    func readPage(_ number: UInt64, _ request: SubscriptionBook.PageRequest) {
        let store = self.store
        Task(executorPreference: loop) {  // never the global executor (docs/transport.md)
            let page: Result<SubscriptionBook.Page, StoreError>
            if let store {
                do throws(StoreError) {
                    let bounds = try await store.journalBounds()
                    let events = try await store.lines(after: request.after, limit: request.limit, types: request.types)
                    page = .success(.init(bounds: bounds, events: events))
                } catch {
                    page = .failure(error)
                }
            } else {
                page = .success(.init(bounds: JournalBounds(firstSeq: nil, lastSeq: request.published), events: []))
            }
            _ = self.loop.execute {
                guard let peer = self.peers[number], peer.isOpen, !peer.dropping else { return }
                self.apply(self.book.pageRead(number, request, page, nowMs: Self.nowMs(), queues: self))
            }
        }
    }

    /// Claims a durable name's cursor in the store and hands it to the book.
    func claimCursor(_ number: UInt64, _ claim: SubscriptionBook.CursorClaim) {
        guard let store else { return }
        let maxPerOwner = configuration.maxDurablePerUID
        Task(executorPreference: loop) {
            let start: Result<JournalSeq, SocketAPIError>
            do {
                start = .success(try await store.claimCursor(claim.name, uid: claim.uid, start: claim.start, maxPerOwner: maxPerOwner))
            } catch {
                start = .failure(SubscriptionBook.storeFailure(error, field: "durable"))
            }
            _ = self.loop.execute {
                guard let peer = self.peers[number], peer.isOpen else { return }
                self.apply(self.book.cursorClaimed(number, claim, start, nowMs: Self.nowMs(), queues: self))
            }
        }
    }

    /// `ack`: stores the durable name's cursor and answers.
    func setCursor(_ number: UInt64, id: JSONValue?, name: String, seq: JournalSeq, uid: UInt32) {
        guard let store else { return }
        let maxPerOwner = configuration.maxDurablePerUID
        Task(executorPreference: loop) {
            let result: Result<JSONValue, SocketAPIError>
            do {
                let cursor = try await store.setCursor(name, seq, uid: uid, maxPerOwner: maxPerOwner)
                result = .success(.object(["cursor": .number(cursor)]))
            } catch {
                result = .failure(SubscriptionBook.storeFailure(error, field: "seq"))
            }
            _ = self.loop.execute {
                guard let peer = self.peers[number] else { return }
                self.respond(peer, id: id, result)
            }
        }
    }

    /// `forget`: deletes a durable name of this peer's uid (any name for root).
    func forget(_ peer: SocketAPIPeerConnection, id: JSONValue?, name: String) {
        guard let store else {
            respond(peer, id: id, .failure(SocketAPIError(.internal, "this server has no journal")))
            return
        }
        guard let uid = peer.info.uid else {
            respond(peer, id: id, .failure(SubscriptionBook.noCredentials("forget")))
            return
        }
        let number = peer.number
        Task(executorPreference: loop) {
            let result: Result<JSONValue, SocketAPIError>
            do {
                if try await store.removeCursor(name, uid: uid) {
                    result = .success(.object([:]))
                } else {
                    result = .failure(.badRequest("field \"durable\": there is no durable subscription named \"\(name)\" (already forgotten, or never acknowledged)"))
                }
            } catch {
                result = .failure(SubscriptionBook.storeFailure(error, field: "durable"))
            }
            _ = self.loop.execute {
                guard let peer = self.peers[number] else { return }
                self.respond(peer, id: id, result)
            }
        }
    }
}
