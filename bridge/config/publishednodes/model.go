package publishednodes

// Entry is one element of a published nodes file and the payload of OPC
// Publisher's configuration API: its PublishedNodesEntryModel, the members
// the gateway maps. The JSON names are OPC Publisher's. Numbers are float64
// so that a file's 1000.0 or "1000" reads as OPC Publisher reads it; the
// mapping checks their ranges.
type Entry struct {
	EndpointURL                       string    `json:"EndpointUrl"`
	UseSecurity                       *bool     `json:"UseSecurity,omitempty"`
	EndpointSecurityMode              string    `json:"EndpointSecurityMode,omitempty" doc:"None, Sign, SignAndEncrypt, NotNone or Best"`
	EndpointSecurityPolicy            string    `json:"EndpointSecurityPolicy,omitempty"`
	OpcAuthenticationMode             string    `json:"OpcAuthenticationMode,omitempty" doc:"Anonymous or UsernamePassword"`
	OpcAuthenticationUsername         string    `json:"OpcAuthenticationUsername,omitempty"`
	OpcAuthenticationPassword         string    `json:"OpcAuthenticationPassword,omitempty" doc:"write-only"`
	DataSetWriterGroup                string    `json:"DataSetWriterGroup,omitempty"`
	DataSetWriterID                   string    `json:"DataSetWriterId,omitempty"`
	DataSetPublishingInterval         *float64  `json:"DataSetPublishingInterval,omitempty" doc:"milliseconds"`
	DataSetPublishingIntervalTimespan string    `json:"DataSetPublishingIntervalTimespan,omitempty" doc:"[d.]hh:mm:ss[.fffffff]"`
	DataSetSamplingInterval           *float64  `json:"DataSetSamplingInterval,omitempty" doc:"milliseconds; the default of the nodes"`
	DataSetSamplingIntervalTimespan   string    `json:"DataSetSamplingIntervalTimespan,omitempty"`
	DefaultHeartbeatInterval          *float64  `json:"DefaultHeartbeatInterval,omitempty" doc:"milliseconds; the default of the nodes"`
	DefaultHeartbeatIntervalTimespan  string    `json:"DefaultHeartbeatIntervalTimespan,omitempty"`
	DataSetKeyFrameCount              *float64  `json:"DataSetKeyFrameCount,omitempty"`
	MessagingMode                     string    `json:"MessagingMode,omitempty" doc:"Samples or PubSub"`
	MessageEncoding                   string    `json:"MessageEncoding,omitempty" doc:"Json"`
	OpcNodes                          []OpcNode `json:"OpcNodes,omitempty"`
	// NodeID is the one node of an entry of OPC Publisher 2.5 and before.
	NodeID *OpcNode `json:"NodeId,omitempty" doc:"OPC Publisher 2.5: the entry's one node"`
}

// OpcNode is OPC Publisher's OpcNodeModel (the members the gateway maps).
type OpcNode struct {
	ID             string `json:"Id,omitempty"`
	ExpandedNodeID string `json:"ExpandedNodeId,omitempty"`
	// Identifier is the node id of OPC Publisher 2.5's "NodeId" object.
	Identifier                    string       `json:"Identifier,omitempty"`
	DisplayName                   string       `json:"DisplayName,omitempty"`
	DataSetFieldID                string       `json:"DataSetFieldId,omitempty"`
	OpcSamplingInterval           *float64     `json:"OpcSamplingInterval,omitempty" doc:"milliseconds"`
	OpcSamplingIntervalTimespan   string       `json:"OpcSamplingIntervalTimespan,omitempty"`
	OpcPublishingInterval         *float64     `json:"OpcPublishingInterval,omitempty" doc:"milliseconds"`
	OpcPublishingIntervalTimespan string       `json:"OpcPublishingIntervalTimespan,omitempty"`
	HeartbeatInterval             *float64     `json:"HeartbeatInterval,omitempty" doc:"seconds"`
	HeartbeatIntervalTimespan     string       `json:"HeartbeatIntervalTimespan,omitempty"`
	QueueSize                     *float64     `json:"QueueSize,omitempty"`
	DiscardNew                    *bool        `json:"DiscardNew,omitempty"`
	DataChangeTrigger             string       `json:"DataChangeTrigger,omitempty" doc:"Status, StatusValue or StatusValueTimestamp"`
	DeadbandType                  string       `json:"DeadbandType,omitempty" doc:"Absolute or Percent"`
	DeadbandValue                 *float64     `json:"DeadbandValue,omitempty"`
	EventFilter                   *EventFilter `json:"EventFilter,omitempty"`
}

// EventFilter is OPC Publisher's EventFilterModel: the node is an event
// notifier.
type EventFilter struct {
	TypeDefinitionID string         `json:"TypeDefinitionId,omitempty"`
	SelectClauses    []SelectClause `json:"SelectClauses,omitempty"`
	// WhereClause is a ContentFilter; one OfType element is mapped.
	WhereClause any `json:"WhereClause,omitempty"`
}

// SelectClause is a SimpleAttributeOperand of a select clause.
type SelectClause struct {
	TypeDefinitionID string   `json:"TypeDefinitionId,omitempty"`
	BrowsePath       []string `json:"BrowsePath,omitempty"`
}

// Documented members of the model that have no counterpart here: reading a
// file, a warning names each one found.
var (
	entryIgnored = []string{"UseReverseConnect", "DataSetClassId", "DataSetName", "DataSetDescription", "DataSetExtensionFields",
		"MetaDataUpdateTime", "MetaDataUpdateTimeTimespan", "SendKeepAliveDataSetMessages", "WriterGroupTransport",
		"WriterGroupQualityOfService", "BatchSize", "BatchTriggerInterval", "BatchTriggerIntervalTimespan",
		"Version", "LastChangeDateTime", "LastChangeTimespan", "DataSetWriterWatchdogBehavior", "WriterGroupPartitions",
		"DataSetRouting", "Priority", "DumpConnectionDiagnostics", "EncryptedAuthPassword", "EncryptedAuthUsername",
		"WriterGroupMessageTtlTimepan", "WriterGroupMessageRetention", "QualityOfService", "MessageRetention",
		"MessageTtlTimespan", "OpcNodeWatchdogTimespan", "OpcNodeWatchdogCondition", "MaxKeepAliveCount",
		"WriterGroupQueueName", "QueueName", "MetaDataQueueName", "DisableSubscriptionTransfer", "RepublishAfterTransfer",
		"DataSetFetchDisplayNames", "DefaultHeartbeatBehavior", "DataSetSourceUri", "Tag"}
	nodeIgnored = []string{"AttributeId", "IndexRange", "UseCyclicRead", "RegisterNode", "FetchDisplayName",
		"SkipFirst", "DataSetClassFieldId", "HeartbeatBehavior", "ConditionHandling", "TriggeredNodes",
		"CyclicReadMaxAge", "CyclicReadMaxAgeTimespan", "ModelChangeHandling", "BrowsePath", "Topic", "QualityOfService",
		"Facet", "EventNotifier"}
	selectIgnored = []string{"DataSetClassFieldId", "AttributeId", "IndexRange", "DisplayName"}
)
