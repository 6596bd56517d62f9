package server

import (
	"strings"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// TransportProfileBinary is the transport profile of opc.tcp with UA Binary.
const TransportProfileBinary = "http://opcfoundation.org/UA-Profile/Transport/uatcp-uasc-uabinary"

// User token policy ids.
const (
	policyAnonymous = "anonymous"
	policyUserName  = "username"
	policyX509      = "x509"
)

// applicationDescription describes the server, with its discovery URL.
func (s *Server) applicationDescription(url string) ua.ApplicationDescription {
	return ua.ApplicationDescription{
		ApplicationURI:  s.cfg.ApplicationURI,
		ProductURI:      s.cfg.ProductURI,
		ApplicationName: ua.LocalizedText{Locale: "en", Text: s.cfg.ApplicationName},
		ApplicationType: ua.ApplicationTypeServer,
		DiscoveryURLs:   []string{url},
	}
}

// buildEndpoints makes one endpoint per configured policy and mode.
func (s *Server) buildEndpoints(url string) []ua.EndpointDescription {
	app := s.applicationDescription(url)
	out := make([]ua.EndpointDescription, 0, len(s.cfg.Policies))
	for _, e := range s.cfg.Policies {
		p, _ := uasc.PolicyByURI(e.PolicyURI)
		ep := ua.EndpointDescription{
			EndpointURL:         url,
			Server:              app,
			SecurityMode:        e.Mode,
			SecurityPolicyURI:   p.URI,
			UserIdentityTokens:  s.userTokenPolicies(p),
			TransportProfileURI: TransportProfileBinary,
			SecurityLevel:       securityLevel(p, e.Mode),
		}
		if s.cert != nil {
			ep.ServerCertificate = s.cert
		}
		out = append(out, ep)
	}
	return out
}

// securityLevel ranks endpoints: encrypted above signed above none, stronger
// policies above weaker ones.
func securityLevel(p *uasc.Policy, mode ua.MessageSecurityMode) byte {
	if p.IsNone() {
		return 0
	}
	var l byte
	switch p.URI {
	case uasc.SecurityPolicyBasic128Rsa15, uasc.SecurityPolicyBasic256:
		l = 1
	case uasc.SecurityPolicyAes128Sha256RsaOaep:
		l = 2
	case uasc.SecurityPolicyBasic256Sha256:
		l = 3
	case uasc.SecurityPolicyAes256Sha256RsaPss:
		l = 4
	}
	if mode == ua.MessageSecurityModeSignAndEncrypt {
		l += 10
	}
	return l
}

// tokenSecurityPolicy is the policy user tokens are protected with on a channel
// of policy p: the channel's own, except on None channels, where passwords are
// still encrypted (and X.509 tokens signed) with Basic256Sha256 when the server
// has a certificate.
func (s *Server) tokenSecurityPolicy(p *uasc.Policy) *uasc.Policy {
	if !p.IsNone() || s.cert == nil {
		return p
	}
	bp, _ := uasc.PolicyByURI(uasc.SecurityPolicyBasic256Sha256)
	return bp
}

func (s *Server) userTokenPolicies(p *uasc.Policy) []ua.UserTokenPolicy {
	var out []ua.UserTokenPolicy
	tokURI := ""
	if p.IsNone() {
		tokURI = s.tokenSecurityPolicy(p).URI
	}
	if !s.cfg.DisableAnonymous {
		out = append(out, ua.UserTokenPolicy{PolicyID: policyAnonymous, TokenType: ua.UserTokenTypeAnonymous})
	}
	if len(s.cfg.Users) > 0 {
		out = append(out, ua.UserTokenPolicy{PolicyID: policyUserName, TokenType: ua.UserTokenTypeUserName, SecurityPolicyURI: tokURI})
	}
	if !s.cfg.DisableX509Users && s.cert != nil {
		out = append(out, ua.UserTokenPolicy{PolicyID: policyX509, TokenType: ua.UserTokenTypeCertificate, SecurityPolicyURI: tokURI})
	}
	return out
}

func (s *Server) getEndpoints(ch *channel, r *uasc.Request, m *ua.GetEndpointsRequest) {
	eps := s.Endpoints()
	if len(m.ProfileURIs) > 0 {
		ok := false
		for _, p := range m.ProfileURIs {
			if p == TransportProfileBinary {
				ok = true
			}
		}
		if !ok {
			eps = nil
		}
	}
	s.respond(ch, r, &ua.GetEndpointsResponse{Endpoints: eps})
}

func (s *Server) findServers(ch *channel, r *uasc.Request, m *ua.FindServersRequest) {
	app := s.applicationDescription(s.URL())
	var out []ua.ApplicationDescription
	if len(m.ServerURIs) == 0 {
		out = append(out, app)
	}
	for _, u := range m.ServerURIs {
		if strings.EqualFold(u, app.ApplicationURI) {
			out = append(out, app)
			break
		}
	}
	s.respond(ch, r, &ua.FindServersResponse{Servers: out})
}

// buildServerObject makes the Server object's essentials: ServerStatus,
// NamespaceArray, ServerArray, ServerCapabilities with OperationLimits, and
// GetMonitoredItems.
func (s *Server) buildServerObject(b *builder) {
	as := b.as
	id := func(n uint32) ua.NodeID { return ua.NewNumericNodeID(0, n) }
	srv := b.object(as.ns0(ua.ID_ObjectsFolder), ua.ID_Organizes, id(ua.ID_Server), "Server", ua.ID_ServerType)
	srv.eventNotifier = byte(ua.EventNotifierTypeSubscribeToEvents)
	srv.events = &eventSource{}
	b.constant(srv, id(ua.ID_Server_ServerArray), "ServerArray", uint32(ua.TypeString), 1, ua.ID_PropertyType,
		ua.MustVariant([]string{s.cfg.ApplicationURI}))
	b.dynamic(srv, id(ua.ID_Server_NamespaceArray), "NamespaceArray", uint32(ua.TypeString), 1, ua.ID_PropertyType,
		func(ua.DateTime) ua.DataValue { return ua.DataValue{Value: ua.MustVariant(s.as.namespaces)} })
	b.constant(srv, id(ua.ID_Server_ServiceLevel), "ServiceLevel", uint32(ua.TypeByte), -1, ua.ID_PropertyType, ua.MustVariant(byte(255)))
	b.constant(srv, id(ua.ID_Server_Auditing), "Auditing", uint32(ua.TypeBoolean), -1, ua.ID_PropertyType, ua.NewBooleanVariant(false))

	startTime := ua.NewDateTime(s.start)
	build := ua.BuildInfo{
		ProductURI: s.cfg.ProductURI, ManufacturerName: "uagate", ProductName: s.cfg.ApplicationName,
		SoftwareVersion: "1.0", BuildNumber: "sim", BuildDate: startTime,
	}
	status := b.dynamic(srv, id(ua.ID_Server_ServerStatus), "ServerStatus", ua.ID_ServerStatusDataType, -1, ua.ID_ServerStatusType,
		func(now ua.DateTime) ua.DataValue {
			st := &ua.ServerStatusDataType{StartTime: startTime, CurrentTime: now, State: ua.ServerState(s.state.Load()), BuildInfo: build}
			return ua.DataValue{Value: ua.MustVariant(ua.NewExtensionObject(st)), SourceTimestamp: now}
		})
	b.constant(status, id(ua.ID_Server_ServerStatus_StartTime), "StartTime", ua.ID_UtcTime, -1, ua.ID_BaseDataVariableType, ua.NewDateTimeVariant(startTime))
	b.dynamic(status, id(ua.ID_Server_ServerStatus_CurrentTime), "CurrentTime", ua.ID_UtcTime, -1, ua.ID_BaseDataVariableType,
		func(now ua.DateTime) ua.DataValue {
			return ua.DataValue{Value: ua.NewDateTimeVariant(now), SourceTimestamp: now}
		})
	b.dynamic(status, id(ua.ID_Server_ServerStatus_State), "State", ua.ID_ServerState, -1, ua.ID_BaseDataVariableType,
		func(now ua.DateTime) ua.DataValue {
			return ua.DataValue{Value: ua.NewInt32Variant(s.state.Load())}
		})
	bi := b.constant(status, id(ua.ID_Server_ServerStatus_BuildInfo), "BuildInfo", ua.ID_BuildInfo, -1, ua.ID_BuildInfoType,
		ua.MustVariant(ua.NewExtensionObject(&build)))
	for _, f := range []struct {
		id   uint32
		name string
		v    ua.Variant
	}{
		{ua.ID_Server_ServerStatus_BuildInfo_ProductUri, "ProductUri", ua.NewStringVariant(build.ProductURI)},
		{ua.ID_Server_ServerStatus_BuildInfo_ManufacturerName, "ManufacturerName", ua.NewStringVariant(build.ManufacturerName)},
		{ua.ID_Server_ServerStatus_BuildInfo_ProductName, "ProductName", ua.NewStringVariant(build.ProductName)},
		{ua.ID_Server_ServerStatus_BuildInfo_SoftwareVersion, "SoftwareVersion", ua.NewStringVariant(build.SoftwareVersion)},
		{ua.ID_Server_ServerStatus_BuildInfo_BuildNumber, "BuildNumber", ua.NewStringVariant(build.BuildNumber)},
		{ua.ID_Server_ServerStatus_BuildInfo_BuildDate, "BuildDate", ua.NewDateTimeVariant(build.BuildDate)},
	} {
		dt := uint32(ua.TypeString)
		if f.name == "BuildDate" {
			dt = ua.ID_UtcTime
		}
		b.constant(bi, id(f.id), f.name, dt, -1, ua.ID_BaseDataVariableType, f.v)
	}
	b.constant(status, id(ua.ID_Server_ServerStatus_SecondsTillShutdown), "SecondsTillShutdown", uint32(ua.TypeUInt32), -1, ua.ID_BaseDataVariableType, ua.NewUInt32Variant(0))
	b.constant(status, id(ua.ID_Server_ServerStatus_ShutdownReason), "ShutdownReason", uint32(ua.TypeLocalizedText), -1, ua.ID_BaseDataVariableType, ua.MustVariant(ua.LocalizedText{}))

	c := &s.cfg
	caps := b.object(srv, ua.ID_HasComponent, id(ua.ID_Server_ServerCapabilities), "ServerCapabilities", ua.ID_ServerCapabilitiesType)
	prop := func(parent *node, n uint32, name string, dt uint32, v ua.Variant) {
		rank := int32(-1)
		if v.IsArray() {
			rank = 1
		}
		b.constant(parent, id(n), name, dt, rank, ua.ID_PropertyType, v)
	}
	prop(caps, ua.ID_Server_ServerCapabilities_ServerProfileArray, "ServerProfileArray", uint32(ua.TypeString),
		ua.MustVariant([]string{"http://opcfoundation.org/UA-Profile/Server/StandardUA2017"}))
	prop(caps, ua.ID_Server_ServerCapabilities_LocaleIdArray, "LocaleIdArray", uint32(ua.TypeString), ua.MustVariant([]string{"en"}))
	prop(caps, ua.ID_Server_ServerCapabilities_MinSupportedSampleRate, "MinSupportedSampleRate", ua.ID_Duration,
		ua.NewDoubleVariant(float64(c.MinSamplingInterval)/1e6))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxBrowseContinuationPoints, "MaxBrowseContinuationPoints", uint32(ua.TypeUInt16),
		ua.MustVariant(uint16(c.MaxBrowseContinuationPoints)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxHistoryContinuationPoints, "MaxHistoryContinuationPoints", uint32(ua.TypeUInt16),
		ua.MustVariant(uint16(c.MaxHistoryContinuationPoints)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxQueryContinuationPoints, "MaxQueryContinuationPoints", uint32(ua.TypeUInt16), ua.MustVariant(uint16(0)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxArrayLength, "MaxArrayLength", uint32(ua.TypeUInt32), ua.NewUInt32Variant(uint32(ua.DefaultLimits.MaxArrayLength)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxStringLength, "MaxStringLength", uint32(ua.TypeUInt32), ua.NewUInt32Variant(uint32(ua.DefaultLimits.MaxStringLength)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxByteStringLength, "MaxByteStringLength", uint32(ua.TypeUInt32), ua.NewUInt32Variant(uint32(ua.DefaultLimits.MaxByteStringLength)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxSessions, "MaxSessions", uint32(ua.TypeUInt32), ua.NewUInt32Variant(uint32(c.MaxSessionCount)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxSubscriptions, "MaxSubscriptions", uint32(ua.TypeUInt32), ua.NewUInt32Variant(uint32(c.MaxSubscriptionCount)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxMonitoredItems, "MaxMonitoredItems", uint32(ua.TypeUInt32), ua.NewUInt32Variant(uint32(c.MaxMonitoredItems)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxSubscriptionsPerSession, "MaxSubscriptionsPerSession", uint32(ua.TypeUInt32), ua.NewUInt32Variant(uint32(c.MaxSubscriptionsPerSession)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxMonitoredItemsPerSubscription, "MaxMonitoredItemsPerSubscription", uint32(ua.TypeUInt32), ua.NewUInt32Variant(uint32(c.MaxMonitoredItemsPerSubscription)))
	prop(caps, ua.ID_Server_ServerCapabilities_MaxMonitoredItemsQueueSize, "MaxMonitoredItemsQueueSize", uint32(ua.TypeUInt32), ua.NewUInt32Variant(c.MaxQueueSize))

	if !c.HideOperationLimits {
		s.buildOperationLimits(b, caps)
	}

	u32 := ua.NewNumericNodeID(0, uint32(ua.TypeUInt32))
	b.method(srv, id(ua.ID_Server_GetMonitoredItems), "GetMonitoredItems",
		[]ua.Argument{{Name: "SubscriptionId", DataType: u32, ValueRank: -1}},
		[]ua.Argument{{Name: "ServerHandles", DataType: u32, ValueRank: 1}, {Name: "ClientHandles", DataType: u32, ValueRank: 1}},
		s.getMonitoredItemsMethod)
}

// buildOperationLimits makes ServerCapabilities/OperationLimits with the limits
// the services enforce; 0 means no limit (the services without one here).
func (s *Server) buildOperationLimits(b *builder, caps *node) {
	c := &s.cfg
	id := func(n uint32) ua.NodeID { return ua.NewNumericNodeID(0, n) }
	limits := b.object(caps, ua.ID_HasComponent, id(ua.ID_Server_ServerCapabilities_OperationLimits), "OperationLimits", ua.ID_OperationLimitsType)
	for _, l := range []struct {
		id   uint32
		name string
		v    uint32
	}{
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerRead, "MaxNodesPerRead", c.MaxNodesPerRead},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerWrite, "MaxNodesPerWrite", c.MaxNodesPerWrite},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerMethodCall, "MaxNodesPerMethodCall", c.MaxNodesPerMethodCall},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerBrowse, "MaxNodesPerBrowse", c.MaxNodesPerBrowse},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerRegisterNodes, "MaxNodesPerRegisterNodes", c.MaxNodesPerRegisterNodes},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerTranslateBrowsePathsToNodeIds, "MaxNodesPerTranslateBrowsePathsToNodeIds", c.MaxNodesPerTranslateBrowsePathsToNodeIDs},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerNodeManagement, "MaxNodesPerNodeManagement", 0},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxMonitoredItemsPerCall, "MaxMonitoredItemsPerCall", c.MaxMonitoredItemsPerCall},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerHistoryReadData, "MaxNodesPerHistoryReadData", c.MaxNodesPerHistoryReadData},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerHistoryReadEvents, "MaxNodesPerHistoryReadEvents", 0},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerHistoryUpdateData, "MaxNodesPerHistoryUpdateData", 0},
		{ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerHistoryUpdateEvents, "MaxNodesPerHistoryUpdateEvents", 0},
	} {
		b.constant(limits, id(l.id), l.name, uint32(ua.TypeUInt32), -1, ua.ID_PropertyType, ua.NewUInt32Variant(l.v))
	}
}
