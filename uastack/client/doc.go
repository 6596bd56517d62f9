// Package client is the OPC UA client of the gateway: sessions and the services it
// calls on them (OPC UA Part 4 §5.6 – §5.11).
//
// Connecting. Dial discovers the server's endpoints (GetEndpoints, or the cached
// Config.Endpoints), selects one (SelectEndpoint: the configured policy and mode,
// or the best the server offers), validates the server's certificate with the
// pki.Store before anything is sent to it, opens the secure channel (package
// uasc), and creates and activates a session:
//
//   - CreateSession: the server must sign our certificate and nonce with the key
//     of the certificate we validated, send a nonce of at least 32 bytes, and
//     list the same endpoints GetEndpoints showed (on a secure channel the two
//     lists are compared as a whole, field by field as Part 4 §5.6.2 says: a
//     stripped, added or altered endpoint is an *EndpointMismatchError);
//   - ActivateSession: we sign the server's certificate and nonce, and present
//     the user identity (Anonymous, UserName with the password encrypted for
//     the server as its token policy says, or X509 signed with the user's key).
//
// It then reads the server's OperationLimits and namespace array once.
//
// Trust. The application instance certificate comes from the Store (created on
// first start for ApplicationURI). A server certificate the Store does not trust
// is refused with an error wrapping *pki.UntrustedError, which names the copy the
// Store wrote to rejected/; moving it to trusted/ makes the next Dial succeed.
// Config.AutoAccept trusts unknown certificates instead (development only),
// and only those that pass every other check: an expired certificate, or one
// for another host or application, is refused and not written to trusted/.
//
// Errors. The sentinel errors are in errors.go; each wraps its OPC UA status
// code. ClassifyFailure tells a permanent failure (FailureReason: the user or
// a certificate refused, no endpoint with the configured security, an
// endpoint URL that cannot work) from one a retry may cure.
//
// Services. Read, Write, Browse (following continuation points to the end),
// BrowseNext, TranslateBrowsePathsToNodeIDs, RegisterNodes, UnregisterNodes,
// Call and HistoryReadRaw (history.go: raw values of a time range, continuation
// points followed or released, MaxNodesPerHistoryReadData and
// MaxHistoryContinuationPoints kept) split their requests to fit the server's
// OperationLimits and reassemble the results in request order; a server that enforces a limit it did not publish gets
// smaller requests after its first BadTooManyOperations. Send sends any other
// service request on the session, filling in the request header.
//
// Concurrency and ownership. A Client is safe for concurrent use. Requests passed
// to its methods get their RequestHeader filled in (so they are written to): a
// request must not be changed, or used by another call, while a call runs with it.
// Responses belong to the caller. ReadInto
// decodes into a caller's response, reusing its slices. A Client does not keep the
// session alive or reconnect: that is the managed session's job, built on
// Send, SendAsync, RequestHeader, Done and Err.
//
// Subscriptions (subscription.go, monitored.go, publish.go, gap.go, resend.go).
// CreateSubscription, on a Client or a ManagedSession, makes a Subscription;
// its monitored items are created in batches within the server's limits and
// named by client handles the subscription assigns. An item may name its node
// by namespace URI (ItemRequest.Node, nsu=): the URI is resolved against the
// server's namespace array whenever the item is created on the server, so a
// server restarted with its namespaces in another order still gets the node
// meant. A publish engine per session keeps several Publish requests at the
// server, checks sequence numbers (duplicates dropped, gaps filled with
// Republish on at most two goroutines per session, never on the dispatch
// goroutine) and calls the handlers on one dispatch goroutine, in sequence
// order per subscription. Ownership: a handler's notification slice comes from
// pooled objects and is valid only until the handler returns; the engine
// releases it in a defer. Steady state allocates nothing per notification.
//
// Acknowledgement (the delivery contract). SubscriptionConfig.AckMode:
// AckOnReturn acknowledges a message once its handlers returned; AckManual
// leaves it to Subscription.Ack (any goroutine, no allocation, never blocks),
// with at most MaxUnacked messages delivered and not acknowledged. At that
// limit the engine sends no Publish request for the subscription (a session
// whose subscriptions are all held sends none at all): the server's queues hold
// the data, and the subscription counts neither as silent nor as failed. A
// message for a held subscription that arrives anyway is left unacknowledged
// at the server and fetched with Republish once there is room, in order; use
// one subscription per session for at-least-once delivery. OnMessageDone says
// when all of a message's notifications were handed over. After a transfer
// the unacknowledged messages stay acknowledgeable; after a recreation they
// are forgotten (OnGap with to == 0). After a reactivation or a transfer, a
// value a server sends again (same value, status and source timestamp as the
// last one delivered for the item) is dropped and counted
// (SubscriptionStats.Suppressed). The header comment of subscription.go has
// the details.
//
// Resume (resume.go). SubscriptionConfig.Resume takes over a subscription
// an earlier process (or another replica) made, from the ResumeState it
// kept (Subscription.ResumeState: the subscription's id, its items' server
// ids by client handle, the last acknowledged sequence number; built at
// each call, Subscription.ResumeMark tells cheaply whether it changed):
// TransferSubscriptions to the new session, the items adopted by handle
// instead of created, and the messages the server kept republished in order,
// with Subscription.Redelivered true during their handlers (they may be
// duplicates). When the server no longer has it, it is created anew and
// OnGap(LastAcked+1, 0) reports the loss.
//
// Restarts (sessionstate.go). A session outlives its channel and its
// process: Client.SessionState is what another process needs to activate it
// again on a new secure channel (ResumeSession; Part 4 §5.6.3), for the same
// application certificate and user. Its subscriptions are then still its own:
// SubscriptionConfig.Resume takes them up without TransferSubscriptions
// (Subscription.Stats().Adopted), which servers refuse for an anonymous user
// on an unsecured channel; what the server kept unacknowledged, and what it
// queued meanwhile, is delivered as after a transfer. ManagedConfig.SavedSession
// and OnSession make a managed session keep and reuse its state;
// ManagedSession.Suspend stops a process's use of a session leaving it at the
// server for the next process, Detach leaves only the subscriptions (for
// another process that cannot use the session: another certificate).
//
// Managed sessions (managed.go, backoff.go, pool.go). A ManagedSession
// reconnects with Backoff, watches keep-alives and the server's status (a
// stalled connection is noticed within a subscription's keep-alive window
// plus KeepAliveGrace), and recovers its subscriptions: reactivate the session
// on a new channel, else transfer the subscriptions to a new session, else
// recreate them (the loss is reported). Its first connection activates the
// session of an earlier process first (SavedSession). A permanent failure puts it in
// StateFailed with its FailureReason, retrying on the slow PermanentBackoff
// (1 min to 10 min) so that a wrong password does not lock the account and a
// fixed trust list or configuration is still picked up. Its Publish requests
// follow the round trip (more outstanding the farther the server) within
// MaxPublishRequests and the server's BadTooManyPublishRequests, probing for
// one more every minute. Close(ctx) drains: no new Publish requests, the responses still
// coming are delivered, gap fills end, AckManual subscriptions get until ctx
// ends to acknowledge, and the acknowledgements go out in a last Publish
// before the session is closed. A Pool holds managed sessions keyed by the
// whole connection identity (PoolKey: URL, security policy and mode, user,
// group), behind one connect rate limiter; the same key asked for with another
// configuration is ErrPoolConflict.
package client
