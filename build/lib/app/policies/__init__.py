"""Pure scheduling policies: functions of snapshots and parameters, no I/O, no clock, no globals."""
