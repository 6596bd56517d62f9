// Package publishednodes is OPC Publisher's configuration format mapped onto
// the gateway's configuration model (bridge/config): one mapping, used by
// the file loader for publishednodes.json and by the OPC Publisher
// compatible REST API (/v2/configuration, package api), so that an entry
// becomes the same endpoint, writer groups, writers and fields whichever
// way it comes in.
//
//	r, errs, warns := publishednodes.Resolve(&entry) // check and convert
//	warns = publishednodes.Publish(cfg, r)           // find or create the parts, add the nodes
//
// Importing the package registers the file format with bridge/config
// (config.RegisterFormat), after which config.Load and config.Parse read
// publishednodes.json as well as YAML. The package maps onto config's types,
// so it sits above config, which cannot import it; api imports it, and
// with it every gateway.
//
// # The mapping
//
// Members are OPC Publisher 2.9's (PublishedNodesEntryModel, OpcNodeModel);
// 2.5's entries of one "NodeId" are read too. A file's keys are matched
// case-insensitively and may carry // and /* */ comments; every member
// the gateway does not map is a warning that names it.
//
//   - EndpointUrl (opc.tcp://host:port[/path]) with its security and user
//     is an endpoint: entries with the same URL (case and a trailing /
//     aside), security mode, policy, identity type and user name share one
//     (one session). A new endpoint is named after the URL's host and
//     port, every character but letters, digits, '-', '.' and '_' made
//     '_' (opc.tcp://plc1:4840 → plc1_4840), made unique with _2, _3 ….
//   - UseSecurity true: SignAndEncrypt with the best policy; false or
//     absent: None. EndpointSecurityMode (None, Sign, SignAndEncrypt,
//     NotNone = SignAndEncrypt, Best) and EndpointSecurityPolicy override
//     it; a policy other than None with mode None makes the mode best.
//   - OpcAuthenticationMode Anonymous or UsernamePassword (with
//     OpcAuthenticationUsername and …Password) is the identity; Certificate
//     (a certificate in OPC Publisher's user store) is refused.
//   - DataSetWriterGroup is a writer group of the endpoint (default: the
//     endpoint's name). Ours has one endpoint and one publishing interval
//     (one subscription): where OPC Publisher's group spans endpoints or
//     intervals it becomes several, the one of another endpoint <name>_2,
//     the one of another interval <name>_<interval> (warned); a request
//     naming the group finds these too.
//   - DataSetWriterId is a dataset writer (default: the publishing interval
//     in milliseconds, as OPC Publisher names it).
//   - A node's publishing interval is its OpcPublishingInterval, else the
//     entry's DataSetPublishingInterval, else the interval its writer
//     already has, else 1 s. Members counted in time take a number
//     (milliseconds; HeartbeatInterval: seconds, as in OPC Publisher) or
//     their …Timespan twin, a .NET TimeSpan "[d.]hh:mm:ss[.fffffff]",
//     which wins.
//   - OpcNodes are fields: Id, else ExpandedNodeId, is the node
//     ("{namespace uri}#{id}" becomes nsu=…;id); DataSetFieldId, else
//     DisplayName, else the node id is the name, made unique in the writer
//     with _2, _3 …. A node published again in its writer under the same
//     name takes the new settings. OpcSamplingInterval (default the entry's
//     DataSetSamplingInterval), HeartbeatInterval (default the entry's
//     DefaultHeartbeatInterval), QueueSize, DiscardNew (= !discardOldest),
//     DataChangeTrigger, DeadbandType/DeadbandValue and EventFilter are the
//     field's monitoring settings.
//   - DataSetKeyFrameCount and MessagingMode (Samples, PubSub) are settings
//     of the writer group the entry creates.
//
// Names that become topic levels (groups, writers) have the characters a
// topic level cannot hold replaced by '_' (warned).
//
// The REST API's operations on a configuration (Unpublish, UnpublishAll,
// Replace, Nodes, Entries) are here too; the API owns only HTTP. They
// change the *config.Config they are given: call them on a copy.
package publishednodes
