// Package clienttest holds the tests of package client against the real
// API over a real store. They live in the service module, not beside the
// client, so that the client's own module needs nothing but the root
// module: a program that talks to retryd does not inherit the service's
// dependencies.
package clienttest
