"""Recipe engine: criteria → a version-pinned, validated recipe, from the overlay catalog.

`catalog` loads and checks the YAML data, `resolve` matches and merges overlays into a
`dsx.model.recipe.Recipe`, `graph` orders components by dependencyRefs, `selector` reads values
for `dsx query`, `snapshot_criteria` derives criteria from node facts. See docs/recipes.md.
"""
