// driver.cpp — the C++ side of the driver tests: both generated headers in one C++ program,
// states owned by std::unique_ptr, results checked with the standard library.
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <vector>

#include "affine.h"
#include "mlp.h"

namespace {

int passed = 0, failed = 0;

void check(bool ok, const char *what) {
    if (ok) {
        ++passed;
    } else {
        ++failed;
        std::printf("FAIL %s\n", what);
    }
}

struct MlpDelete {
    void operator()(mlp_state *s) const { mlp_destroy(s); }
};
struct AffineDelete {
    void operator()(affine_state *s) const { affine_destroy(s); }
};

}  // namespace

int main() {
    std::unique_ptr<mlp_state, MlpDelete> mlp(mlp_create(7));
    std::unique_ptr<affine_state, AffineDelete> affine(affine_create(7));
    check(mlp && affine, "both models are created");
    if (!mlp || !affine) return 1;

    // The affine model's output feeds the MLP's first features: two models, one program.
    float *w = affine_w(affine.get());
    std::iota(w, w + AFFINE_W_SIZE, 0.0f);                  // [[0 1 2] [3 4 5]]
    std::fill(affine_bias(affine.get()), affine_bias(affine.get()) + AFFINE_BIAS_SIZE, 0.5f);
    std::fill(affine_x(affine.get()), affine_x(affine.get()) + AFFINE_X_SIZE, 1.0f);
    check(affine_predict(affine.get()) == TSR_OK, "affine_predict");
    const float *y = affine_y(affine.get());
    check(y[0] == 3.5f && y[1] == 12.5f, "y = w x + bias");

    float *x = mlp_features(mlp.get());
    std::fill(x, x + MLP_FEATURES_SIZE, 0.0f);
    for (unsigned n = 0; n < MLP_FEATURES_DIM0; n++) x[n * MLP_FEATURES_DIM1] = y[n % 2];
    check(mlp_predict(mlp.get()) == TSR_OK, "mlp_predict");

    // Row 0's scores from the parameters, in double.
    const float *w1 = mlp_w1(mlp.get()), *b1 = mlp_b1(mlp.get()), *w2 = mlp_w2(mlp.get());
    std::vector<double> hidden(MLP_B1_DIM0);
    for (unsigned h = 0; h < hidden.size(); h++)
        hidden[h] = std::max(0.0, double(b1[h]) + double(w1[h * MLP_W1_DIM1]) * x[0]);
    bool close = true;
    for (unsigned c = 0; c < MLP_W2_DIM0; c++) {
        double ref = std::inner_product(hidden.begin(), hidden.end(), w2 + c * MLP_W2_DIM1, 0.0);
        close = close && std::fabs(ref - mlp_scores(mlp.get())[c]) < 1e-4;
    }
    check(close, "mlp scores of row 0 equal w2 relu(b1 + w1 x)");
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
