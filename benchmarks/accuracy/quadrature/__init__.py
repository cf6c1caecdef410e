"""The association quadrature against a plain ``scipy.integrate.quad`` reference over the supported
radio exponents (docs/model.md §20)."""
