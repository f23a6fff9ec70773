package file

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/model"
)

// modelMemo keeps the model objects converted from a controlplane.Reconciler's
// Services and EndpointSlices, by the API object: a Reconciler gives the
// same object for what did not change, so a reload converts only what did
// (10,000 Services and their slices: about 15 ms of a reload), and the store
// it feeds tells an unchanged object by its pointer. A model object is
// shared between loads: the store never modifies one.
type modelMemo struct {
	services   map[*corev1.Service]*model.Service
	slices     map[*discoveryv1.EndpointSlice]*model.EndpointSlice
	nextSvc    map[*corev1.Service]*model.Service
	nextSlices map[*discoveryv1.EndpointSlice]*model.EndpointSlice
}

// begin starts a load's conversion; end makes it what the next one reuses.
func (m *modelMemo) begin(services, slices int) {
	m.nextSvc = make(map[*corev1.Service]*model.Service, services)
	m.nextSlices = make(map[*discoveryv1.EndpointSlice]*model.EndpointSlice, slices)
}

func (m *modelMemo) end() {
	m.services, m.slices, m.nextSvc, m.nextSlices = m.nextSvc, m.nextSlices, nil, nil
}

// service converts s, or gives the model object converted from it last time.
func (m *modelMemo) service(s *corev1.Service) (*model.Service, error) {
	if m == nil {
		return model.ServiceFromAPI(s)
	}
	out, ok := m.services[s]
	if !ok {
		var err error
		if out, err = model.ServiceFromAPI(s); err != nil {
			return nil, err
		}
	}
	m.nextSvc[s] = out
	return out, nil
}

// slice converts s, or gives what it converted to last time; ok is false
// for a slice the model does not hold (model.EndpointSliceFromAPI).
func (m *modelMemo) slice(s *discoveryv1.EndpointSlice) (*model.EndpointSlice, bool, error) {
	if m == nil {
		return model.EndpointSliceFromAPI(s)
	}
	if out, ok := m.slices[s]; ok {
		m.nextSlices[s] = out
		return out, true, nil
	}
	out, ok, err := model.EndpointSliceFromAPI(s)
	if err == nil && ok {
		m.nextSlices[s] = out
	}
	return out, ok, err
}
