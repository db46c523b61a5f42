package ondatra_test

import (
	"os"
	"strings"
	"testing"

	"github.com/openconfig/goyang/pkg/yang"
	"github.com/openconfig/ondatra/gnmi/otg"
)

// TestTheServersSchemaIsOndatras checks the server's pin against ondatra's: every node of the
// trees gapless fills (its schema.tsv, from models-yang at its pinned commit) is in the
// schema ondatra's otg package was generated from, with the same kind, type and list keys.
// The two pins differ (ondatra's has no macsec or mka): the trees gapless serves must not.
func TestTheServersSchemaIsOndatras(t *testing.T) {
	data, err := os.ReadFile(os.Getenv("GAPLESS_SCHEMA_TSV"))
	if err != nil {
		t.Fatalf("expected the server's schema table at $GAPLESS_SCHEMA_TSV; got %v", err)
	}
	root := otg.SchemaTree["Root"]
	served := []string{"flows", "ports", "interfaces", "bgp-peers", "isis-routers", "ospfv2-routers", "ospfv3-routers", "lldps", "lags", "lacp"}
	var bad []string
	checked := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 5 || !strings.HasPrefix(f[1], "/") {
			continue
		}
		elems := strings.Split(strings.TrimPrefix(f[1], "/"), "/")
		if !contains(served, elems[0]) {
			continue
		}
		checked++
		e := root
		for _, name := range elems {
			if e = e.Dir[name]; e == nil {
				break
			}
		}
		switch {
		case e == nil:
			bad = append(bad, f[1]+": not in ondatra's schema")
		case kind(e) != f[0]:
			bad = append(bad, f[1]+": a "+kind(e)+" in ondatra's schema, a "+f[0]+" in ours")
		case e.Type != nil && e.Type.Name != f[2]:
			bad = append(bad, f[1]+": of type "+e.Type.Name+" in ondatra's schema, "+f[2]+" in ours")
		case e.IsList() && e.Key != f[4]:
			bad = append(bad, f[1]+": keyed by "+e.Key+" in ondatra's schema, by "+f[4]+" in ours")
		}
	}
	if checked < 800 || len(bad) > 0 {
		t.Errorf("expected every one of the served trees' nodes (%d checked, at least 800) in ondatra's schema alike; got %d differences:\n%s",
			checked, len(bad), strings.Join(bad, "\n"))
	}
}

func kind(e *yang.Entry) string {
	switch {
	case e.IsLeafList():
		return "leaf-list"
	case e.IsLeaf():
		return "leaf"
	case e.IsList():
		return "list"
	}
	return "container"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
