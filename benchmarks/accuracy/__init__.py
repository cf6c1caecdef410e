"""How far the model's numbers are from a simulation or a real trace, one room per question.

``cell`` (the cell-load queue model), ``replay`` (a real trace against the plan), ``engine`` (batching
engines, engine caches, production routers and the engine law), ``telemetry`` (the online router under
old telemetry), ``extensions`` (serving extensions and the queue law), ``quadrature`` (the association
quadrature against ``scipy.integrate.quad``)."""
