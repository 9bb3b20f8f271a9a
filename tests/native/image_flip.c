/* image_flip.c — a damaged model image is refused: every single-bit flip of affine.tsr's image
 * (and a few thousand random multi-bit changes and truncations) makes tsr_state_create fail
 * with TSR_ERR_IMAGE and a message that says what is wrong, instead of building a state from
 * garbage (runtime/internal.h: the image's checksum).  Built by tests/native/c_api.sh.  Prints
 * one line per check and "N passed, N failed". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "affine.h"

static int passed, failed;

static void check(int ok, const char *what) {
    if (ok) passed++;
    else failed++;
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
}

static int last_status;
static void hook(int status, const char *message, void *user) {
    (void)message;
    (void)user;
    last_status = status;
}

/* Is the image refused with TSR_ERR_IMAGE and one of the image messages?  Counts which. */
static unsigned refused_as[4];
static int refused(const unsigned char *image, size_t size) {
    last_status = 0;
    tsr_state *s = tsr_state_create(image, size, 1);
    if (s) {
        tsr_state_destroy(s);
        return 0;
    }
    const char *m = tsr_last_error();
    if (last_status != TSR_ERR_IMAGE) return 0;
    if (strcmp(m, "not a tsrc model image") == 0) refused_as[0]++;
    else if (strncmp(m, "the model image has version ", 28) == 0) refused_as[1]++;
    else if (strncmp(m, "the model image is damaged (its checksum does not match over the ", 65) == 0 &&
             strstr(m, " bytes given: pass MODULE__image_size as its size, or rebuild the object)"))
        refused_as[2]++;
    else if (strncmp(m, "the model image is cut short (", 30) == 0) refused_as[3]++;
    else return 0;
    return 1;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    tsr_set_error_hook(hook, NULL);
    size_t size = (size_t)affine__image_size;
    unsigned char *copy = malloc(size);
    if (!copy) return 2;
    memcpy(copy, affine__image, size);
    tsr_state *s = tsr_state_create(copy, size, 1);
    check(s != NULL, "the intact image (a copy) creates a state");
    tsr_state_destroy(s);

    char line[512];
    size_t accepted = 0, first = SIZE_MAX;
    for (size_t bit = 0; bit < size * 8; bit++) {
        copy[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        if (!refused(copy, size)) {
            accepted++;
            if (first == SIZE_MAX) first = bit;
        }
        copy[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    snprintf(line, sizeof line,
             "every one of the %zu single-bit flips of the %zu-byte image is refused (accepted: %zu, the first at "
             "bit %zu; refused as not an image %u, as another version %u, as damaged %u)",
             size * 8, size, accepted, accepted ? first : 0, refused_as[0], refused_as[1], refused_as[2]);
    check(accepted == 0, line);
    check(refused_as[2] > 0 && memcmp(copy, affine__image, size) == 0,
          "flips after the header are reported as 'the model image is damaged'");

    /* Random damage: 2 to 8 bytes changed at random places (a fixed xorshift sequence). */
    uint64_t x = 0x9e3779b97f4a7c15u;
    accepted = 0;
    for (int round = 0; round < 4000; round++) {
        int n = 2 + (int)(round % 7);
        for (int k = 0; k < n; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            copy[x % size] ^= (unsigned char)(1 + (x >> 32) % 255);
        }
        if (memcmp(copy, affine__image, size) != 0 && !refused(copy, size)) accepted++;
        memcpy(copy, affine__image, size);
    }
    snprintf(line, sizeof line, "4000 images with 2-8 random bytes changed are refused (accepted: %zu)", accepted);
    check(accepted == 0, line);

    /* Cut short, or with bytes after the end. */
    accepted = 0;
    for (size_t n = 0; n < size; n++) accepted += !refused(copy, n);
    unsigned char *longer = malloc(size + 8);
    if (!longer) return 2;
    memcpy(longer, affine__image, size);
    memset(longer + size, 0, 8);
    accepted += !refused(longer, size + 8);
    free(longer);
    snprintf(line, sizeof line, "the image cut at every length, or with 8 bytes more, is refused (accepted: %zu)",
             accepted);
    check(accepted == 0, line);
    refused_as[0] = refused_as[1] = refused_as[3] = 0;
    for (size_t n = 0; n < 16; n++) refused(copy, n);
    check(refused_as[3] == 16 && refused_as[0] == 0 && refused_as[1] == 0,
          "an image cut inside its header (0 to 15 bytes) is 'cut short', not another version or not an image");
    refused_as[2] = 0;
    refused(copy, size - 1);
    check(refused_as[2] == 1 && strstr(tsr_last_error(), "over the ") &&
          atoi(strstr(tsr_last_error(), "over the ") + 9) == (int)size - 1,
          "a wrong size is 'damaged' over the bytes given, with the size to pass");
    check(tsr_state_create(NULL, 0, 1) == NULL, "no image (NULL, 0) is refused");

    s = tsr_state_create(copy, size, 1);
    check(s != NULL, "the intact image still creates a state afterwards");
    tsr_state_destroy(s);
    free(copy);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
