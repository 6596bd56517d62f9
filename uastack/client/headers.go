// Code generated from the service messages of package ua (every type with a
// RequestHeader or ResponseHeader field); DO NOT EDIT by hand, regenerate with the
// command in the comment of requestHeader when ua gains a service.

package client

import "github.com/uagate/gateway/uastack/ua"

// requestHeader returns a pointer to the RequestHeader of a service request, or nil
// when req is not one. (Regenerate: grep -B1 "^\tRequestHeader  *RequestHeader$"
// uastack/ua/types_gen.go.) A generated method in package ua would make this
// switch unnecessary.
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

// responseHeader returns a pointer to the ResponseHeader of a service response, or
// nil when resp is not one.
func responseHeader(resp ua.Structure) *ua.ResponseHeader {
	switch r := resp.(type) {
	case *ua.ServiceFault:
		return &r.ResponseHeader
	case *ua.FindServersResponse:
		return &r.ResponseHeader
	case *ua.FindServersOnNetworkResponse:
		return &r.ResponseHeader
	case *ua.GetEndpointsResponse:
		return &r.ResponseHeader
	case *ua.RegisterServerResponse:
		return &r.ResponseHeader
	case *ua.RegisterServer2Response:
		return &r.ResponseHeader
	case *ua.OpenSecureChannelResponse:
		return &r.ResponseHeader
	case *ua.CloseSecureChannelResponse:
		return &r.ResponseHeader
	case *ua.CreateSessionResponse:
		return &r.ResponseHeader
	case *ua.ActivateSessionResponse:
		return &r.ResponseHeader
	case *ua.CloseSessionResponse:
		return &r.ResponseHeader
	case *ua.CancelResponse:
		return &r.ResponseHeader
	case *ua.AddNodesResponse:
		return &r.ResponseHeader
	case *ua.AddReferencesResponse:
		return &r.ResponseHeader
	case *ua.DeleteNodesResponse:
		return &r.ResponseHeader
	case *ua.DeleteReferencesResponse:
		return &r.ResponseHeader
	case *ua.BrowseResponse:
		return &r.ResponseHeader
	case *ua.BrowseNextResponse:
		return &r.ResponseHeader
	case *ua.TranslateBrowsePathsToNodeIDsResponse:
		return &r.ResponseHeader
	case *ua.RegisterNodesResponse:
		return &r.ResponseHeader
	case *ua.UnregisterNodesResponse:
		return &r.ResponseHeader
	case *ua.QueryFirstResponse:
		return &r.ResponseHeader
	case *ua.QueryNextResponse:
		return &r.ResponseHeader
	case *ua.ReadResponse:
		return &r.ResponseHeader
	case *ua.HistoryReadResponse:
		return &r.ResponseHeader
	case *ua.WriteResponse:
		return &r.ResponseHeader
	case *ua.HistoryUpdateResponse:
		return &r.ResponseHeader
	case *ua.CallResponse:
		return &r.ResponseHeader
	case *ua.CreateMonitoredItemsResponse:
		return &r.ResponseHeader
	case *ua.ModifyMonitoredItemsResponse:
		return &r.ResponseHeader
	case *ua.SetMonitoringModeResponse:
		return &r.ResponseHeader
	case *ua.SetTriggeringResponse:
		return &r.ResponseHeader
	case *ua.DeleteMonitoredItemsResponse:
		return &r.ResponseHeader
	case *ua.CreateSubscriptionResponse:
		return &r.ResponseHeader
	case *ua.ModifySubscriptionResponse:
		return &r.ResponseHeader
	case *ua.SetPublishingModeResponse:
		return &r.ResponseHeader
	case *ua.PublishResponse:
		return &r.ResponseHeader
	case *ua.RepublishResponse:
		return &r.ResponseHeader
	case *ua.TransferSubscriptionsResponse:
		return &r.ResponseHeader
	case *ua.DeleteSubscriptionsResponse:
		return &r.ResponseHeader
	}
	return nil
}
