/* Where the running binary lives on disk.  huskd runs from a sealed memfd
 * copy of itself (CVE-2019-5736: it forks ExecSync's processes into
 * containers), so /proc/self/exe no longer says where husk, husk-monitor
 * and husk-pause are installed; it remembers its path here. */
#ifndef HUSK_CRI_SELF_EXE_H
#define HUSK_CRI_SELF_EXE_H

/* The path given to cri_set_self_exe, else /proc/self/exe's target
 * (malloc'd; NULL when unknown). */
char *cri_self_exe (void);
void cri_set_self_exe (const char *path);

#endif
