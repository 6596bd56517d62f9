// Package natscmd carries commands over NATS: requests on
// <subject>.<caller> (commands.subject; the caller token bound to the user
// by the server's publish permissions), answered by NATS request-reply
// (the request's reply subject), else on the request's replyTo subject,
// else on <subject>.<caller>.reply. It has a connection of its own to the
// sink's server (the sink's credentials and TLS), reconnected by nats.go,
// and subscribes in a queue group, so that of several replicas of the
// gateway one answers each request. Requests go to the command engine
// without waiting (command.Engine.SubmitPayload); nothing here waits for an
// OPC UA server.
package natscmd
