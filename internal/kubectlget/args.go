package kubectlget

import (
	"fmt"
	"strings"
)

// request is what get's arguments ask for: types, each with the names
// asked for (none: every object of the type).
type request struct {
	kinds []*kind
	names map[*kind][]string
	// single: one object asked for by name, which kubectl prints alone
	// rather than in a List.
	single bool
	// several: more than one type, which kubectl names KIND/NAME.
	several bool
}

// parseArgs reads get's arguments as kubectl does: TYPE[,TYPE...] [NAME...],
// or TYPE/NAME... ("all" is the types of allKinds).
func parseArgs(args []string) (*request, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("you must specify the type of resource to get. Use \"svcnet get --help\" for the types")
	}
	r := &request{names: map[*kind][]string{}}
	add := func(k *kind, names ...string) {
		if _, ok := r.names[k]; !ok {
			r.kinds = append(r.kinds, k)
		}
		r.names[k] = append(r.names[k], names...)
	}
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			t, name, ok := strings.Cut(a, "/")
			if !ok || name == "" {
				return nil, fmt.Errorf("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'svcnet get resource/<resource_name>' instead of 'svcnet get resource resource/<resource_name>'")
			}
			k := kindOf(t)
			if k == nil {
				return nil, unknownType(t)
			}
			add(k, name)
		}
		r.single = len(args) == 1
		r.several = len(r.kinds) > 1
		return r, nil
	}
	types := strings.Split(args[0], ",")
	var ks []*kind
	for _, t := range types {
		if strings.EqualFold(t, "all") {
			for _, a := range allKinds {
				ks = append(ks, kindOf(a))
			}
			r.several = true
			continue
		}
		k := kindOf(t)
		if k == nil {
			return nil, unknownType(t)
		}
		ks = append(ks, k)
	}
	for _, n := range args[1:] {
		if strings.Contains(n, "/") {
			return nil, fmt.Errorf("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'svcnet get resource/<resource_name>' instead of 'svcnet get resource resource/<resource_name>'")
		}
	}
	for _, k := range ks {
		add(k, args[1:]...)
	}
	r.single = len(r.kinds) == 1 && len(args) == 2 && !r.several
	r.several = r.several || len(r.kinds) > 1
	return r, nil
}

// unknownType is kubectl's error for a type the server does not have.
func unknownType(t string) error {
	return fmt.Errorf("the server doesn't have a resource type %q", t)
}

// Needs returns the types (plural names) args ask for, for a caller that
// lists them before Get; errors as Get's.
func Needs(args []string) ([]string, error) {
	r, err := parseArgs(args)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(r.kinds))
	for i, k := range r.kinds {
		out[i] = k.resource
	}
	return out, nil
}
