package ob1

// FastPolls is the receive fast path's polling budget, for tests.
const FastPolls = fastPolls
