
/* hostile: compile a system file in, for its first line to show in the build's errors. */
#include "/etc/passwd"
