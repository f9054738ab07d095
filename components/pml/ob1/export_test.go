package ob1

// FastPolls is the receive fast path's polling budget, for tests.
const FastPolls = fastPolls

// PipeRun is how many messages go pipelined after the receiver took one by
// fragments, for tests.
const PipeRun = pipeRun

// PipeTrialRun is the length of a run of PIPEs that tries fragments.
const PipeTrialRun = pipeTrialRun
