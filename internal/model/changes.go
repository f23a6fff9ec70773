package model

import (
	"cmp"
	"reflect"
	"slices"
)

// ServiceChange is the net change of one Service (with its slices) between two
// snapshots. Old is nil for a new Service, New is nil for a deleted one.
type ServiceChange struct {
	Key      ServiceKey
	Old, New *ServiceState
}

// NodeChange is the net change of one Node.
type NodeChange struct {
	Name     string
	Old, New *Node
}

// PodChange is the net change of one Pod.
type PodChange struct {
	Key      PodKey
	Old, New *Pod
}

// Changes lists what changed between two snapshots, each list sorted by key.
type Changes struct {
	Services []ServiceChange
	Nodes    []NodeChange
	Pods     []PodChange
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return len(c.Services) == 0 && len(c.Nodes) == 0 && len(c.Pods) == 0
}

// changeSet accumulates changes, merging successive changes of one key into a single
// (first old, last new) pair and dropping pairs that came back to where they were.
type changeSet struct {
	services map[ServiceKey]*ServiceChange
	nodes    map[string]*NodeChange
	pods     map[PodKey]*PodChange
}

func newChangeSet() *changeSet {
	return &changeSet{
		services: map[ServiceKey]*ServiceChange{},
		nodes:    map[string]*NodeChange{},
		pods:     map[PodKey]*PodChange{},
	}
}

func (cs *changeSet) merge(c Changes) {
	for _, ch := range c.Services {
		if p := cs.services[ch.Key]; p != nil {
			p.New = ch.New
		} else {
			ch := ch
			cs.services[ch.Key] = &ch
		}
	}
	for _, ch := range c.Nodes {
		if p := cs.nodes[ch.Name]; p != nil {
			p.New = ch.New
		} else {
			ch := ch
			cs.nodes[ch.Name] = &ch
		}
	}
	for _, ch := range c.Pods {
		if p := cs.pods[ch.Key]; p != nil {
			p.New = ch.New
		} else {
			ch := ch
			cs.pods[ch.Key] = &ch
		}
	}
}

// take returns the net changes and empties the set.
func (cs *changeSet) take() Changes {
	var out Changes
	for _, ch := range cs.services {
		if !equalState(ch.Old, ch.New) {
			out.Services = append(out.Services, *ch)
		}
	}
	for _, ch := range cs.nodes {
		if !reflect.DeepEqual(ch.Old, ch.New) {
			out.Nodes = append(out.Nodes, *ch)
		}
	}
	for _, ch := range cs.pods {
		if !reflect.DeepEqual(ch.Old, ch.New) {
			out.Pods = append(out.Pods, *ch)
		}
	}
	slices.SortFunc(out.Services, func(a, b ServiceChange) int { return CompareServiceKeys(a.Key, b.Key) })
	slices.SortFunc(out.Nodes, func(a, b NodeChange) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Pods, func(a, b PodChange) int { return CompareServiceKeys(a.Key, b.Key) })
	*cs = *newChangeSet()
	return out
}

// equalState compares two Service states by value; nil equals only nil.
func equalState(a, b *ServiceState) bool {
	if a == b {
		return true
	}
	return a.Equal(b)
}
