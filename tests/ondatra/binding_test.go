// A static binding for gapless serve, the shape of featureprofiles' static binding for an ATE
// run without KNE (topologies/binding: ates { name otg { target insecure } gnmi { target
// skip_verify } ports { id name } } and options { username password }): the module proxy
// serves no featureprofiles version here (403), so the few lines that dial an ATE are written
// again. The binding file is JSON with those field names.
package ondatra_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/open-traffic-generator/snappi/gosnappi"
	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ondatra/binding"
	opb "github.com/openconfig/ondatra/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

var bindingFile = flag.String("binding", "", "the binding file (JSON): the ATE's OTG and gNMI targets and its ports")

type service struct {
	Target     string `json:"target"`
	Insecure   bool   `json:"insecure"`
	SkipVerify bool   `json:"skip_verify"`
}

type ateBinding struct {
	Name  string  `json:"name"`
	OTG   service `json:"otg"`
	GNMI  service `json:"gnmi"`
	Ports []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"ports"`
}

type bindFile struct {
	ATEs    []ateBinding `json:"ates"`
	Options struct {
		Username string `json:"username"`
		Password string `json:"password"`
	} `json:"options"`
}

type staticBind struct {
	file bindFile
}

func newBinding() (binding.Binding, error) {
	raw, err := os.ReadFile(*bindingFile)
	if err != nil {
		return nil, fmt.Errorf("the binding file (-binding): %w", err)
	}
	b := &staticBind{}
	if err := json.Unmarshal(raw, &b.file); err != nil {
		return nil, fmt.Errorf("the binding file %s: %w", *bindingFile, err)
	}
	return b, nil
}

func (b *staticBind) Reserve(ctx context.Context, tb *opb.Testbed, _, _ time.Duration, _ map[string]string) (*binding.Reservation, error) {
	res := &binding.Reservation{ID: "gapless", DUTs: map[string]binding.DUT{}, ATEs: map[string]binding.ATE{}}
	for _, want := range tb.GetAtes() {
		var ab *ateBinding
		for i := range b.file.ATEs {
			if b.file.ATEs[i].Name == want.GetId() || len(b.file.ATEs) == 1 {
				ab = &b.file.ATEs[i]
			}
		}
		if ab == nil {
			return nil, fmt.Errorf("no ATE in the binding for testbed ATE %q", want.GetId())
		}
		dims := &binding.Dims{Name: ab.Name, Vendor: opb.Device_OPENCONFIG, Ports: map[string]*binding.Port{}}
		for _, p := range ab.Ports {
			dims.Ports[p.ID] = &binding.Port{Name: p.Name}
		}
		res.ATEs[want.GetId()] = &ate{AbstractATE: &binding.AbstractATE{Dims: dims}, b: ab, opts: b.file.Options}
	}
	return res, nil
}

func (b *staticBind) Release(context.Context) error { return nil }

func (b *staticBind) FetchReservation(context.Context, string) (*binding.Reservation, error) {
	return nil, fmt.Errorf("this binding keeps no reservations")
}

type ate struct {
	*binding.AbstractATE
	b    *ateBinding
	opts struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
}

// creds sends the binding's username and password with every call, as featureprofiles'
// static binding does (gapless checks the password as its token when it has one).
type creds struct{ user, pass string }

func (c creds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"username": c.user, "password": c.pass}, nil
}

func (c creds) RequireTransportSecurity() bool { return false }

func (a *ate) dial(ctx context.Context, s service, opts []grpc.DialOption) (*grpc.ClientConn, error) {
	switch {
	case s.Insecure:
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	default:
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: s.SkipVerify})))
	}
	if a.opts.Password != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(creds{a.opts.Username, a.opts.Password}))
	}
	return grpc.NewClient(s.Target, opts...)
}

func (a *ate) DialOTG(ctx context.Context, opts ...grpc.DialOption) (gosnappi.Api, error) {
	conn, err := a.dial(ctx, a.b.OTG, opts)
	if err != nil {
		return nil, err
	}
	api := gosnappi.NewApi()
	api.NewGrpcTransport().SetClientConnection(conn).SetRequestTimeout(30 * time.Second)
	return api, nil
}

func (a *ate) DialGNMI(ctx context.Context, opts ...grpc.DialOption) (gpb.GNMIClient, error) {
	conn, err := a.dial(ctx, a.b.GNMI, opts)
	if err != nil {
		return nil, err
	}
	return gpb.NewGNMIClient(conn), nil
}
