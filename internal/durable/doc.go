// Package durable holds the file-system steps that make a write survive a
// crash or a power loss, shared by forage's file stores.
package durable
