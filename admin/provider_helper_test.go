package admin_test

import "github.com/forage-go/forage/budget"

// provider returns reg's Provider for key, creating it; a registry that
// cannot create one fails the test loudly.
func provider(reg *budget.Registry, key string) budget.Provider {
	p, err := reg.Get(key)
	if err != nil {
		panic(err)
	}
	return p
}
