// Package poll is how herald's tests wait: they call a condition until it holds or a deadline
// passes, and a failure says what was awaited and what the condition saw last. Tests never
// sleep to wait for an event; they poll with a generous deadline, which a passing test never
// waits out (the machines that run them are busy).
package poll
