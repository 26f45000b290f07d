package cluster

import "sync"

// apps are a node's apps by id: AddApp may add one at any time (an app created while the
// node runs). The state stream looks its records' apps up here.
type apps struct{ m sync.Map } // app id -> *App

// put adds a.
func (s *apps) put(a *App) { s.m.Store(a.id, a) }

// app returns the app with id, nil if it was never added.
func (s *apps) app(id string) *App {
	if a, ok := s.m.Load(id); ok {
		return a.(*App)
	}
	return nil
}

// eachApp calls f with every app added.
func (s *apps) eachApp(f func(id string, a *App)) {
	s.m.Range(func(k, v any) bool { f(k.(string), v.(*App)); return true })
}
