"""Domain ``things``: an ocean liner and a grape variety. Questions are marked with *.

* ``ship`` (12 paragraphs, 9 questions): overview naming the ship (owners, launch year*, yard, tonnage, home port);
  cargo; design (length*, naval architect); engines (service speed*, coal, stokers); passengers (first-class
  berths*, crew); life on board (purser, bandleader, promenade deck); maiden voyage (a novelist, the captain*); war
  service (soldiers carried*, a torpedo, the dockyard); later career (refit, the buyer*); a collision (freighter,
  inquiry); fate (breaker's yard, nautical miles sailed*, the museum); the sister ship* and the society of former
  crew. The ship is never renamed in the text (a new name would be an alias). Later paragraphs say "the ship",
  "she", "her".
* ``grape_variety`` (12 paragraphs, 9 questions): overview naming the variety (colour, region, vineyard area*, a
  parent); pests (rootstock breeder, organic area); history (first record*, monastery, nurseryman); the vine (bunch
  weight*, yields); soils and climate (altitude*, sunshine); wines (cooper, the estate making the sweet wine*);
  producers (the largest producer*, a famous vineyard, auction price); in the kitchen (restaurant, chef); research
  station (the ampelographer*); market (price per kilogram*, exports, wine route); abroad (countries, exporter,
  competition); harvest festival (the poet's ode*). Later paragraphs say "the variety", "the grape", "the vine".
"""

from __future__ import annotations

from curation.sources.controlled.template import (
    FEW,
    MANY,
    MONTHS,
    PERSON,
    PLACE,
    SEVERAL,
    Choice,
    Later,
    Name,
    Number,
    Template,
    Year,
)

SHIP = Template(
    name="ship",
    domain="things",
    noun="ship",
    entity=Name(("{W}",)),
    paragraphs=(
        "{entity} was a {ship_kind} built for the {line} and launched in {launch_year} at the yard of {yard} on the "
        "river estuary. With a gross tonnage of {tonnage}, she was for a few years the largest ship of her owners' "
        "fleet, and she sailed for more than three decades on the route between {home_port} and the colonies across "
        "the ocean, carrying mail, cargo and passengers.",
        "Below the passenger decks, {holds} holds carried about {cargo_tons} of cargo on each crossing, from "
        "machinery and cloth on the way out to coffee, rubber and timber on the way home. Refrigerated rooms, "
        "installed after the first years of service, held {chilled} of frozen meat, and a mail room sorted letters "
        "and parcels during the voyage so that they could be delivered on arrival.",
        "The ship was {length} long and {beam} wide, with {funnels} funnels and {masts} masts. The hull was divided "
        "into {compartments} watertight compartments, and her designer, the naval architect {naval_architect}, gave "
        "her a raked bow that was copied by several later liners. The interiors were fitted out by a firm of "
        "decorators from the capital in oak, marble and brass.",
        "Propulsion came from {engine_kind} driving {screws} screws, for a service speed of {speed} and a top speed "
        "about two knots higher on trials. The boiler rooms held {boilers} coal-fired boilers, which burned about "
        "{coal} of coal a day and needed a crew of {stokers} working in shifts of four hours in the heat below the "
        "waterline.",
        "Accommodation was provided for {first_class} in first class, {second_class} in second class and about "
        "{third_class} in third class, most of them emigrants. The first-class dining saloon, under a dome of "
        "coloured glass, seated {saloon_seats} at once. A crew of {crew} looked after the passengers and worked the "
        "ship, from the officers on the bridge to the bakers in the galley.",
        "Daily life on board followed a strict routine: a bell rang for meals in each class, and the purser, "
        "{purser}, posted the noon position of the ship on a board outside the saloon. The library held about "
        "{ship_books}, a small orchestra of {musicians} musicians led by {bandleader} played at dinner, and on calm "
        "evenings there was dancing on the promenade deck, {promenade_m} long, under strings of electric lamps.",
        "The maiden voyage began on a grey morning in {maiden_month} and took {voyage_days} days, a record for the "
        "route at the time. Among the passengers was the novelist {novelist}, who later set a chapter of a novel on "
        "board. The captain on that first crossing, {captain}, commanded the ship for her first {captain_years} "
        "years and was given a gold watch by the owners on retiring from the sea.",
        "During the war the ship was requisitioned as a troop transport, painted grey and armed with {guns} guns. "
        "She carried about {troops} soldiers in all, and in {torpedo_year} survived a torpedo hit off the coast of "
        "{cape}, reaching port with her bow low in the water. The repairs took {repair_months} months at the naval "
        "dockyard of {dockyard}.",
        "After the war the ship returned to the passenger route, now burning oil instead of coal, and in "
        "{refit_year} she was refitted with a swimming pool and new cabins for tourist class. Falling trade led her "
        "owners to sell her in {sale_year} to the {buyer}, which used her for cruises in warm waters for another "
        "{cruise_seasons} seasons.",
        "The most serious accident in peacetime came on a foggy night, when the ship collided with the freighter "
        "{freighter} near the mouth of the estuary; {lifeboats} lifeboats were lowered, but every passenger was "
        "taken back on board by dawn. The court of inquiry, chaired by {inquiry_judge}, blamed the freighter's "
        "lookout and praised the calm of the ship's crew.",
        "The ship's last voyage ended at a breaker's yard in {breaker}, where she was scrapped over {scrap_months} "
        "months after a career of {career_miles} nautical miles. Her bell and a builder's model were saved and are "
        "now displayed in the maritime museum of {museum_port}, together with the logbook of the maiden voyage and "
        "a menu from the first-class saloon.",
        "A sister ship, {sister}, was ordered at the same time but completed {sister_delay} years later, after a "
        "strike at the yard. Model makers still sell kits of the liner, and a society of former crew members and "
        "passengers, {society_members} strong, founded in {society_year}, meets each year on the anniversary of the "
        "maiden voyage. Its archive holds about {photos}.",
    ),
    slots={
        "ship_kind": Choice(("passenger liner", "cargo liner", "mail steamer", "emigrant ship")),
        "line": Name(("{W} Line", "{W} Steamship Company")),
        "launch_year": Year(1840, 1959),
        "yard": Name(("{W} and Sons", "{W} Shipbuilding")),
        "tonnage": Number(4_000, 48_000, step=10, unit=" tons"),
        "promenade_m": Number(600, 2_400, decimals=1, unit=" metres"),
        "home_port": PLACE,
        "bandleader": PERSON,
        "dockyard": PLACE,
        "society_members": Number(120, 2_900, step=5),
        "holds": SEVERAL,
        "cargo_tons": Number(2_000, 19_000, step=10, unit=" tons"),
        "chilled": Number(120, 990, unit=" tonnes"),
        "length": Number(900, 2_900, decimals=1, unit=" metres"),
        "beam": Number(120, 320, decimals=1, unit=" metres"),
        "funnels": Choice(("two", "three", "four")),
        "masts": Choice(("two", "four")),
        "compartments": SEVERAL,
        "naval_architect": PERSON,
        "engine_kind": Choice(("steam turbines", "triple-expansion engines", "quadruple-expansion engines")),
        "screws": Choice(("two", "three", "four")),
        "speed": Number(120, 260, decimals=1, unit=" knots"),
        "boilers": Choice(("twelve", "sixteen", "eighteen", "twenty-four")),
        "coal": Number(80, 690, unit=" tons"),
        "stokers": Number(40, 290, unit=" stokers"),
        "first_class": Number(120, 690, unit=" passengers"),
        "second_class": Number(150, 890, unit=" passengers"),
        "third_class": Number(600, 2_400, step=5, unit=" passengers"),
        "saloon_seats": Number(80, 390, unit=" diners"),
        "crew": Number(200, 790, unit=" people"),
        "purser": PERSON,
        "ship_books": Number(800, 4_900, step=10, unit=" books"),
        "musicians": SEVERAL,
        "maiden_month": MONTHS,
        "voyage_days": SEVERAL,
        "novelist": PERSON,
        "captain": PERSON,
        "captain_years": SEVERAL,
        "guns": FEW,
        "troops": Number(12_000, 190_000, step=100),
        "torpedo_year": Later("launch_year", 5, 30),
        "cape": PLACE,
        "repair_months": SEVERAL,
        "refit_year": Later("launch_year", 12, 25),
        "sale_year": Later("launch_year", 26, 34),
        "buyer": Name(("{W} Cruise Company", "{W} Navigation")),
        "cruise_seasons": SEVERAL,
        "freighter": PLACE,
        "lifeboats": MANY,
        "inquiry_judge": PERSON,
        "breaker": PLACE,
        "scrap_months": SEVERAL,
        "career_miles": Number(1_200_000, 3_900_000, step=10_000),
        "museum_port": PLACE,
        "sister": PLACE,
        "sister_delay": FEW,
        "society_year": Later("launch_year", 40, 60),
        "photos": Number(400, 9_900, step=10, unit=" photographs"),
    },
    questions={
        "launch_year": "In which year was the ship {entity} launched?",
        "length": "How long was the ship {entity}?",
        "speed": "What was the service speed of the ship {entity}?",
        "first_class": "How many first-class passengers could the ship {entity} carry?",
        "captain": "Who was the captain of the ship {entity} on the maiden voyage?",
        "troops": "How many soldiers did the ship {entity} carry during the war?",
        "buyer": "To which company was the ship {entity} sold?",
        "career_miles": "How many nautical miles did the ship {entity} sail in its career?",
        "sister": "What was the name of the sister ship of {entity}?",
    },
)

GRAPE_VARIETY = Template(
    name="grape_variety",
    domain="things",
    noun="grape variety",
    entity=Name(("{W}",)),
    paragraphs=(
        "{entity} is a {grape_colour} grape variety grown mainly in the {grape_region}, where it covers about "
        "{grape_area} of vineyards. It gives {wine_style} wines with aromas of {aroma_a} and {aroma_b}, and it is "
        "valued by growers for its resistance to spring frost. Genetic analysis has shown that it is a natural "
        "cross between {parent} and an old local grape that is no longer grown.",
        "The vine is sensitive to powdery mildew and to a root louse that destroyed most of the old vineyards in "
        "the nineteenth century; the growers replanted on resistant rootstocks bred by {rootstock_breeder}. "
        "Spraying is needed about {sprays} times a season in wet years, and organic estates now farm about "
        "{organic_ha} of the variety, a share that has doubled in ten years.",
        "The variety is first recorded in {grape_first_record}, in a list of vines kept by the cellarer of a "
        "monastery near {monastery_town}. It spread along the river in the following centuries, carried by boatmen "
        "who traded wine and salt. A nursery owner, {nurseryman}, selected the clone that most growers plant today "
        "and sold about {cuttings} cuttings in a single year.",
        "The vine is vigorous and ripens {ripening} of the season, about {ripening_days} days after flowering. "
        "Bunches are {bunch_shape} and weigh about {bunch_g} on average, with thick-skinned berries that resist "
        "rot. Typical yields reach {yield_hl} per hectare, though the best estates prune hard to keep them lower "
        "and thin the bunches in summer.",
        "The grape does best on {soil} soils on slopes facing south, at altitudes from the river up to about "
        "{altitude} above the sea. It needs a long, dry autumn: in cool years the wines are thin and sharp, and the "
        "growers sell more of the harvest to the cooperatives. The warmest sites receive around {grape_sun} hours "
        "of sunshine in the growing season.",
        "The wines are usually {wine_aging} and bottled within a year, but the finest are aged for {aging_months} "
        "months in large oak casks made by the cooper {cooper}. They reach about {alcohol} of alcohol. A sweet wine "
        "made from late-harvested grapes is produced only in exceptional years, by the estate of {sweet_estate}, "
        "and sold in half bottles at {sweet_price} each. Older vintages develop notes of honey and dried fruit.",
        "The largest producer is the {coop}, a cooperative of {coop_members} that fills about {coop_bottles} "
        "bottles a year. The most famous single vineyard, {vineyard}, sits on a steep terrace above the river and "
        "was planted by monks; its wines fetch up to {auction_price} a bottle at the auction held every spring in "
        "the old cloister.",
        "Local cooks serve the wines with freshwater fish, mushrooms and the hard cheeses of the hills, and a "
        "restaurant in {restaurant_village} has built its whole menu around them. Its cellar lists {cellar_wines} "
        "from the variety, the oldest of them from a vintage remembered for a summer hailstorm, and its chef, "
        "{chef}, has written a cookbook of the valley.",
        "A research station at {research_station} keeps a collection of {clones} of the variety and has bred two "
        "new crosses from it, both resistant to mildew. Its director, the ampelographer {ampelographer}, wrote the "
        "standard description of the grape, which lists {leaf_traits} of its leaves, shoots and berries. The "
        "station also trains young growers in pruning and grafting each winter.",
        "Prices for the grapes reached {grape_price} per kilogram at the last harvest, well above the regional "
        "average. About {grape_export} of the wine is exported, the largest share to the neighbouring countries in "
        "the north. A wine route of {route_km} through the villages of the valley draws cyclists and walkers in the "
        "autumn.",
        "Outside its home region the variety is planted in {countries} countries, most widely in the cooler parts "
        "of the southern hemisphere, where about {abroad_ha} have been planted since the first cuttings were sent "
        "overseas by {exporter}. Wines from these new regions are softer and riper, but several have won prizes at "
        "the competition in {competition_city}.",
        "Each {harvest_month} the harvest is celebrated with a festival at which a queen of the vintage is crowned "
        "and the first new wine is poured. The festival was founded in {grape_festival_year} and now draws about "
        "{grape_festival_visitors} visitors. The poet {grape_poet} wrote a famous ode to the grape, which is "
        "recited at the opening of the festival.",
    ),
    slots={
        "grape_colour": Choice(("red", "white", "dark-skinned", "pale-skinned")),
        "grape_region": Name(("{W} Valley", "{W} Hills")),
        "grape_area": Number(800, 49_000, step=10, unit=" hectares"),
        "wine_style": Choice(("light, fresh", "full-bodied", "aromatic", "crisp, dry", "spicy")),
        "aroma_a": Choice(("cherry", "plum", "apple", "pear", "quince", "blackcurrant", "apricot")),
        "aroma_b": Choice(("pepper", "honey", "violets", "almonds", "herbs", "smoke", "citrus peel")),
        "parent": PLACE,
        "cooper": PERSON,
        "auction_price": Number(40, 990, unit=" euros"),
        "competition_city": PLACE,
        "rootstock_breeder": PERSON,
        "sprays": SEVERAL,
        "organic_ha": Number(120, 4_900, step=5, unit=" hectares"),
        "grape_first_record": Year(1250, 1799),
        "monastery_town": PLACE,
        "nurseryman": PERSON,
        "cuttings": Number(12_000, 390_000, step=1000),
        "ripening": Choice(("in the middle", "at the end", "in the second half")),
        "ripening_days": Choice(("ninety", "a hundred", "a hundred and ten", "a hundred and twenty")),
        "bunch_shape": Choice(("small and compact", "long and loose", "conical", "winged")),
        "bunch_g": Number(120, 690, unit=" grams"),
        "yield_hl": Number(300, 1_200, decimals=1, unit=" hectolitres"),
        "soil": Choice(("slate", "limestone", "loess", "granite", "gravel", "clay")),
        "altitude": Number(200, 890, unit=" metres"),
        "grape_sun": Number(1_100, 2_200, step=5),
        "wine_aging": Choice(("fermented in steel tanks", "fermented in old casks", "fermented in concrete vats")),
        "aging_months": Choice(("twelve", "eighteen", "twenty-four", "thirty")),
        "alcohol": Number(105, 150, decimals=1, unit=" percent", unique=False),
        "sweet_estate": PLACE,
        "sweet_price": Number(1_200, 9_900, step=10, decimals=2, unit=" euros"),
        "coop": Name(("{W} Cooperative", "{W} Growers' Association")),
        "coop_members": Number(120, 1_900, step=5, unit=" growers"),
        "coop_bottles": Number(200_000, 9_900_000, step=10_000),
        "vineyard": Name(("{W}", "{W} Terrace")),
        "restaurant_village": PLACE,
        "cellar_wines": Number(40, 390, unit=" wines"),
        "chef": PERSON,
        "research_station": PLACE,
        "clones": Number(12, 240, unit=" clones"),
        "ampelographer": PERSON,
        "leaf_traits": Number(20, 190, unit=" features"),
        "grape_price": Number(80, 390, decimals=2, unit=" euros"),
        "grape_export": Number(50, 690, decimals=1, unit=" percent"),
        "route_km": Number(40, 290, unit=" kilometres"),
        "countries": SEVERAL,
        "abroad_ha": Number(200, 9_900, step=10, unit=" hectares"),
        "exporter": PERSON,
        "harvest_month": Choice(("September", "October")),
        "grape_festival_year": Year(1850, 1989),
        "grape_festival_visitors": Number(4_000, 190_000, step=500),
        "grape_poet": PERSON,
    },
    questions={
        "grape_area": "How many hectares of vineyards does {entity} cover?",
        "grape_first_record": "In which year is {entity} first recorded?",
        "bunch_g": "How much does an average bunch of {entity} weigh?",
        "altitude": "Up to what altitude is {entity} grown?",
        "sweet_estate": "Which estate makes the sweet wine from {entity}?",
        "coop": "What is the largest producer of {entity}?",
        "ampelographer": "Who wrote the standard description of {entity}?",
        "grape_price": "How much did growers of {entity} receive per kilogram at the last harvest?",
        "grape_poet": "Which poet wrote an ode to {entity}?",
    },
)

TEMPLATES = (SHIP, GRAPE_VARIETY)
