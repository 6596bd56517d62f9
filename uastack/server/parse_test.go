package server

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

func TestParseLists(t *testing.T) {
	rates, err := ParseRates(" 1s, 100ms,,10ms ")
	if want := []time.Duration{time.Second, 100 * time.Millisecond, 10 * time.Millisecond}; err != nil || !reflect.DeepEqual(rates, want) {
		t.Errorf("ParseRates: %v %v", rates, err)
	}
	if _, err := ParseRates("1s,fast"); err == nil {
		t.Error("ParseRates: no error for fast")
	}

	types, err := ParseTypes("double, Int32")
	if want := []ua.TypeID{ua.TypeDouble, ua.TypeInt32}; err != nil || !reflect.DeepEqual(types, want) {
		t.Errorf("ParseTypes: %v %v", types, err)
	}
	if types, err := ParseTypes(" ALL "); types != nil || err != nil {
		t.Errorf("ParseTypes(all): %v %v, want nil (every type)", types, err)
	}
	if _, err := ParseTypes("Int32,Variant"); err == nil {
		t.Error("ParseTypes: Variant is not the type of a simulated variable")
	}

	gens, err := ParseGenerators("counter,Sine")
	if want := []Generator{GeneratorCounter, GeneratorSine}; err != nil || !reflect.DeepEqual(gens, want) {
		t.Errorf("ParseGenerators: %v %v", gens, err)
	}
	if _, err := ParseGenerators("counter,saw"); err == nil {
		t.Error("ParseGenerators: no error for saw")
	}

	users, err := ParseUsers("operator:secret, viewer:a:b,empty:")
	if want := map[string]string{"operator": "secret", "viewer": "a:b", "empty": ""}; err != nil || !reflect.DeepEqual(users, want) {
		t.Errorf("ParseUsers: %v %v", users, err)
	}
	if users, err := ParseUsers(" , "); users != nil || err != nil {
		t.Errorf("ParseUsers(empty): %v %v", users, err)
	}
	for _, s := range []string{"operator", ":pw", "a:b,c"} {
		if _, err := ParseUsers(s); err == nil {
			t.Errorf("ParseUsers(%q): no error", s)
		}
	}
}

func TestParsePolicies(t *testing.T) {
	for _, s := range []string{"", "default", " Default "} {
		if got, err := ParsePolicies(s); err != nil || !reflect.DeepEqual(got, DefaultPolicies()) {
			t.Errorf("%q: %v %v, want DefaultPolicies", s, got, err)
		}
	}
	if got, err := ParsePolicies("all"); err != nil || !reflect.DeepEqual(got, AllPolicies()) {
		t.Errorf("all: %v %v", got, err)
	}
	got, err := ParsePolicies("None, basic256sha256:Sign," + uasc.SecurityPolicyAes128Sha256RsaOaep + ":SignAndEncrypt," + uasc.SecurityPolicyAes256Sha256RsaPss)
	want := []uasc.EndpointSecurity{
		{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone},
		{PolicyURI: uasc.SecurityPolicyBasic256Sha256, Mode: ua.MessageSecurityModeSign},
		{PolicyURI: uasc.SecurityPolicyAes128Sha256RsaOaep, Mode: ua.MessageSecurityModeSignAndEncrypt},
		{PolicyURI: uasc.SecurityPolicyAes256Sha256RsaPss, Mode: ua.MessageSecurityModeSign},
		{PolicyURI: uasc.SecurityPolicyAes256Sha256RsaPss, Mode: ua.MessageSecurityModeSignAndEncrypt},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("list: %v %v\nwant %v", got, err, want)
	}
	if _, err := ParsePolicies("Basic512"); !errors.Is(err, uasc.ErrUnknownPolicy) {
		t.Errorf("Basic512: %v, want ErrUnknownPolicy", err)
	}
	if _, err := ParsePolicies("Basic256Sha256:Encrypt"); err == nil {
		t.Error("mode Encrypt: no error")
	}
}
