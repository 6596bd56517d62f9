// Code generated from uastack/ua/types_gen.go (the types with a RequestHeader field); DO NOT EDIT by hand.
// Regenerate: grep -B1 "^\tRequestHeader  *RequestHeader$" uastack/ua/types_gen.go.

package server

import "github.com/uagate/gateway/uastack/ua"

// requestHeader returns the RequestHeader of a service request, or nil when req is
// not one.
func requestHeader(req ua.Structure) *ua.RequestHeader {
	switch r := req.(type) {
	case *ua.FindServersRequest:
		return &r.RequestHeader
	case *ua.FindServersOnNetworkRequest:
		return &r.RequestHeader
	case *ua.GetEndpointsRequest:
		return &r.RequestHeader
	case *ua.RegisterServerRequest:
		return &r.RequestHeader
	case *ua.RegisterServer2Request:
		return &r.RequestHeader
	case *ua.OpenSecureChannelRequest:
		return &r.RequestHeader
	case *ua.CloseSecureChannelRequest:
		return &r.RequestHeader
	case *ua.CreateSessionRequest:
		return &r.RequestHeader
	case *ua.ActivateSessionRequest:
		return &r.RequestHeader
	case *ua.CloseSessionRequest:
		return &r.RequestHeader
	case *ua.CancelRequest:
		return &r.RequestHeader
	case *ua.AddNodesRequest:
		return &r.RequestHeader
	case *ua.AddReferencesRequest:
		return &r.RequestHeader
	case *ua.DeleteNodesRequest:
		return &r.RequestHeader
	case *ua.DeleteReferencesRequest:
		return &r.RequestHeader
	case *ua.BrowseRequest:
		return &r.RequestHeader
	case *ua.BrowseNextRequest:
		return &r.RequestHeader
	case *ua.TranslateBrowsePathsToNodeIDsRequest:
		return &r.RequestHeader
	case *ua.RegisterNodesRequest:
		return &r.RequestHeader
	case *ua.UnregisterNodesRequest:
		return &r.RequestHeader
	case *ua.QueryFirstRequest:
		return &r.RequestHeader
	case *ua.QueryNextRequest:
		return &r.RequestHeader
	case *ua.ReadRequest:
		return &r.RequestHeader
	case *ua.HistoryReadRequest:
		return &r.RequestHeader
	case *ua.WriteRequest:
		return &r.RequestHeader
	case *ua.HistoryUpdateRequest:
		return &r.RequestHeader
	case *ua.CallRequest:
		return &r.RequestHeader
	case *ua.CreateMonitoredItemsRequest:
		return &r.RequestHeader
	case *ua.ModifyMonitoredItemsRequest:
		return &r.RequestHeader
	case *ua.SetMonitoringModeRequest:
		return &r.RequestHeader
	case *ua.SetTriggeringRequest:
		return &r.RequestHeader
	case *ua.DeleteMonitoredItemsRequest:
		return &r.RequestHeader
	case *ua.CreateSubscriptionRequest:
		return &r.RequestHeader
	case *ua.ModifySubscriptionRequest:
		return &r.RequestHeader
	case *ua.SetPublishingModeRequest:
		return &r.RequestHeader
	case *ua.PublishRequest:
		return &r.RequestHeader
	case *ua.RepublishRequest:
		return &r.RequestHeader
	case *ua.TransferSubscriptionsRequest:
		return &r.RequestHeader
	case *ua.DeleteSubscriptionsRequest:
		return &r.RequestHeader
	}
	return nil
}
