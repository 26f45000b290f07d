package cluster

// appList is every app added, for the tests that walk them.
func (n *node) appList() []*App {
	var out []*App
	n.eachApp(func(_ string, a *App) { out = append(out, a) })
	return out
}
