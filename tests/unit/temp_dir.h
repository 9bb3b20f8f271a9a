/* temp_dir.h — the scratch directory of the C unit tests that write files: make_temp_dir(name)
 * creates /tmp/NAME.XXXXXX, temp_path(file) names a file in it, and remove_temp_dir() removes
 * every plain file in it and then the directory, counting a check that it is gone (a test that
 * listed its files by hand left a directory behind at each run when the list fell behind).
 * Requires check.h, included first.  Included by one test file each. */
#ifndef TSR_UNIT_TEMP_DIR_H
#define TSR_UNIT_TEMP_DIR_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char temp_dir[64];

/* The path of `name` in the temporary directory (a static buffer: use before the next call). */
static const char *temp_path(const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%.190s", temp_dir, name);
    return path;
}

/* Creates /tmp/NAME.XXXXXX; false (with a FAIL line) when it cannot. */
static bool make_temp_dir(const char *name) {
    snprintf(temp_dir, sizeof temp_dir, "/tmp/%.40s.XXXXXX", name);
    if (mkdtemp(temp_dir)) return true;
    printf("FAIL cannot create a temporary directory\n");
    return false;
}

static void remove_temp_dir(void) {
    DIR *dir = opendir(temp_dir);
    if (dir) {
        struct dirent *entry;
        while ((entry = readdir(dir)) != NULL)
            if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) unlink(temp_path(entry->d_name));
        closedir(dir);
    }
    check(rmdir(temp_dir) == 0, "the temporary directory is removed with everything in it", temp_dir);
}

#endif
